# -*- coding: utf-8 -*-
"""Which opensm units the infiniband role sets, and what each running instance needs to take this run's configuration
(restart or SIGHUP), from the registered results of sm_instances.yml (module_utils/infiniband/opensm.py)."""

from __future__ import absolute_import, division, print_function

import base64

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import opensm

A, B = "0x0c42a10300aa0101", "0x0c42a10300aa0201"
SM = [{"guid": A, "device": "mlx5_0", "port": 1}, {"guid": B, "device": "mlx5_1", "port": 1}]
UNIT = {"kind": "unit", "src": "opensm@.service.j2", "dest": "/etc/systemd/system/opensm@.service"}
PARTITIONS = {"kind": "partitions", "src": "partitions.conf.j2", "dest": "/etc/opensm/partitions.conf"}
BASE = "Default=0x7fff,ipoib : ALL=full ;\n"
COMPUTE = "compute=0x0002,ipoib : ALL_CAS=full ;\n"


def _files(changed_guids=(), unit=False, partitions=False):
    """The one write loop of sm_instances.yml: partitions.conf, each instance's opensm.conf, the template unit."""
    return {"results": [{"item": PARTITIONS, "changed": partitions}]
            + [{"item": sm, "changed": sm["guid"] in changed_guids} for sm in SM]
            + [{"item": UNIT, "changed": unit}]}


def _started(*states):
    """One systemd_service result per unit: (guid, changed, ActiveState before or None when systemd had no status)."""
    out = [{"item": {"name": "opensm.service", "guid": None}, "changed": False}]
    for guid, changed, before in states:
        result = {"item": {"name": "opensm@%s.service" % guid, "guid": guid}, "changed": changed}
        if before is not None:
            result["status"] = {"ActiveState": before}
        out.append(result)
    return {"results": out}


def _slurp(text):
    return {"content": base64.b64encode(text.encode()).decode()} if text is not None else {"failed": True}


def _actions(files=None, started=None, old=BASE, new=BASE, written=False):
    """opensm.actions over ``files`` (default: nothing changed) with partitions.conf written by this run or not."""
    results = [dict(r, changed=written) if r["item"] is PARTITIONS else r for r in (files or _files())["results"]]
    return opensm.actions(SM, {"results": results}, started or _started((A, False, "active"), (B, False, "active")),
                          _slurp(old), new)


def test_units_stop_the_distribution_unit_then_start_one_instance_per_port():
    result = opensm.units(SM, ["opensm.service"], _files())
    assert result["daemon_reload"] is False
    assert result["units"] == [
        {"name": "opensm.service", "state": "stopped", "enabled": False, "guid": None},
        {"name": "opensm@%s.service" % A, "state": "started", "enabled": True, "guid": A},
        {"name": "opensm@%s.service" % B, "state": "started", "enabled": True, "guid": B}]
    # only the template unit written makes systemd re-read its units, not an instance's opensm.conf
    assert opensm.units(SM, [], _files(unit=True))["daemon_reload"] is True
    assert opensm.units(SM, [], _files(changed_guids=[A]))["daemon_reload"] is False
    assert opensm.units(SM, [], _files(partitions=True))["daemon_reload"] is False
    assert opensm.units([], [], {})["units"] == []


def test_nothing_changed_nothing_to_do():
    assert _actions() == []
    # partitions.conf rewritten with the same definitions (a comment): nothing either
    assert _actions(old="# old header\n" + BASE, written=True) == []


def test_a_changed_opensm_conf_restarts_its_instance_only():
    assert _actions(files=_files(changed_guids=[B])) == [{"guid": B, "state": "restarted"}]


def test_p_keys_added_or_removed_reload_every_instance_changed_members_restart():
    assert _actions(new=BASE + COMPUTE, written=True) == [{"guid": A, "state": "reloaded"}, {"guid": B, "state": "reloaded"}]
    assert _actions(old=BASE + COMPUTE, new=BASE, written=True) == [
        {"guid": A, "state": "reloaded"}, {"guid": B, "state": "reloaded"}]
    changed = BASE + "compute=0x0002,ipoib : ALL_CAS=limited ;\n"
    assert _actions(old=BASE + COMPUTE, new=changed, written=True) == [
        {"guid": A, "state": "restarted"}, {"guid": B, "state": "restarted"}]
    # a restart wins over a reload for the instance whose opensm.conf changed too
    assert _actions(files=_files(changed_guids=[A]), new=BASE + COMPUTE, written=True) == [
        {"guid": A, "state": "restarted"}, {"guid": B, "state": "reloaded"}]
    # no partitions.conf before (slurp failed): every P_Key is new
    assert _actions(old=None, written=True)[0]["state"] == "reloaded"


@pytest.mark.parametrize("before", [None, "inactive", "failed"])
def test_an_instance_this_run_started_has_read_everything(before):
    started = _started((A, True, before), (B, False, "active"))
    assert _actions(files=_files(changed_guids=[A, B]), started=started, new=BASE + COMPUTE, written=True) == [
        {"guid": B, "state": "restarted"}]


def test_an_instance_this_run_only_enabled_still_takes_the_new_configuration():
    started = _started((A, True, "active"), (B, False, "active"))
    assert _actions(started=started, new=BASE + COMPUTE, written=True) == [
        {"guid": A, "state": "reloaded"}, {"guid": B, "state": "reloaded"}]
    # the units task did not run (check mode, a skipped result): nothing counts as started
    assert opensm.actions(SM, _files(changed_guids=[A]), {}, _slurp(BASE), BASE) == [
        {"guid": A, "state": "restarted"}]
