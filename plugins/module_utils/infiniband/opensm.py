# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The opensm instances of one host, as the infiniband role runs them (one ``opensm@<port GUID>.service`` per
managed port, the role's own template unit): which units the role stops and starts, whether systemd must re-read its
unit files, and what each running instance needs to take the configuration this run wrote - nothing, a restart (its
``opensm.conf`` changed, or a P_Key of ``partitions.conf`` changed its members or flags) or a SIGHUP (P_Keys only
added or removed: the heavy sweep it starts re-reads the file). An instance the run has just started has read
everything already.

Computed from the registered results of the role's tasks (``sm_instances.yml``), so that the YAML reads a result:
``files`` the loop that wrote each instance's ``opensm.conf`` (items with ``guid``) and the template unit (items with
``dest``), ``started`` the ``systemd_service`` loop over :func:`units`. Pure Python.
"""

from __future__ import absolute_import, division, print_function

import base64

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband.infiniband import partitions_change

__metaclass__ = type


def _results(registered):
    return [r for r in ((registered or {}).get("results") or []) if isinstance(r, dict)]


def units(instances, distro_units, files):
    """The units the role sets, in order, and whether systemd re-reads its unit files first (this run wrote the
    template unit, an item of ``files`` with ``dest``): ``{daemon_reload, units: [{name, state, enabled, guid}]}``,
    the distribution's all-ports units (``distro_units``) stopped and disabled (``guid`` None), then one instance
    per managed port (the plan's ``sm``) started and enabled."""
    out = [{"name": unit, "state": "stopped", "enabled": False, "guid": None} for unit in distro_units or []]
    out.extend({"name": "opensm@%s.service" % sm["guid"], "state": "started", "enabled": True, "guid": sm["guid"]}
               for sm in instances or [])
    reload_units = any(r.get("changed") for r in _written(files, "unit"))
    return {"daemon_reload": reload_units, "units": out}


def _written(files, kind):
    """The results of the files of ``kind`` (``partitions``, ``unit``) in sm_instances.yml's one write loop, whose
    other items are the opensm.conf of each instance (no kind)."""
    return [r for r in _results(files) if (r.get("item") or {}).get("kind") == kind]


def _conf_changed(files):
    return set((r.get("item") or {}).get("guid") for r in _results(files)
               if r.get("changed") and "kind" not in (r.get("item") or {}))


def _started(started):
    """Instances this run started: changed, and not active before (systemd_service's ``status`` is the unit's before
    the change; a unit this run only enabled was active, a unit it started had no or another ActiveState)."""
    out = set()
    for result in _results(started):
        guid = (result.get("item") or {}).get("guid")
        if guid and result.get("changed") and (result.get("status") or {}).get("ActiveState") != "active":
            out.add(guid)
    return out


def _text(slurped):
    """The text of an ``ansible.builtin.slurp`` result; empty when there was no file."""
    content = (slurped or {}).get("content")
    return base64.b64decode(content).decode("utf-8", "replace") if content else ""


def actions(instances, files, started, partitions_old, partitions_new):
    """The handler's actions, ``[{guid, state}]`` (``restarted`` or ``reloaded``), in the plan's order: an instance
    whose ``opensm.conf`` changed restarts; a ``partitions.conf`` written by this run (the ``partitions`` item of
    ``files``) makes every instance restart or re-read it as :func:`partitions_change` says (the old file is
    ``partitions_old``, the ``slurp`` result; the standby SM keeps the subnet during a restart); an instance this run
    has just started is left alone."""
    how = (partitions_change(_text(partitions_old), partitions_new or "")
           if any(r.get("changed") for r in _written(files, "partitions")) else "none")
    conf_changed, just_started = _conf_changed(files), _started(started)
    out = []
    for sm in instances or []:
        if sm["guid"] in just_started:
            continue
        if sm["guid"] in conf_changed or how == "restart":
            out.append({"guid": sm["guid"], "state": "restarted"})
        elif how == "reload":
            out.append({"guid": sm["guid"], "state": "reloaded"})
    return out
