# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input rules of the shipped playbooks themselves (pure Python, no Ansible imports): the collection-wide
``rdma_*`` variables and the rolling reboot's ``rolling_reboot_*``. Each message names the variable the user set and
what it takes; the roles' inputs have their own functions (roce_profile, ofed_stack.input_errors, ...), and
``role_errors`` runs those of them that need no host (host_paths, host_settings.profile) in the playbooks' first
check, before any role changes a host."""

from __future__ import absolute_import, division, print_function

import json
import os
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.hpcnet.rdma.plugins.module_utils.host import host_paths
from ansible_collections.hpcnet.rdma.plugins.module_utils.host.host_settings import GDR_MODES, UNLIMITED, profile
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.device_naming import POLICIES as NAMING_POLICIES
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles

__metaclass__ = type

BATCH = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
PERCENT = re.compile(r"^([0-9]|[1-9][0-9]|100)$")
SECONDS = re.compile(r"^[1-9][0-9]*$")
# the rolling reboot's defaults (playbooks/rolling_reboot.yml uses the same)
ROLLING_REBOOT_DEFAULTS = {"rolling_reboot_batches": [1, "10%"], "rolling_reboot_max_fail_percentage": 0,
                           "rolling_reboot_timeout": 900, "rolling_reboot_port_timeout": 300,
                           "rolling_reboot_pre_tasks": [], "rolling_reboot_post_tasks": []}


def _json(value):
    return json.dumps(value, default=str)


def is_boolean(value):
    """True for what Ansible's own conversion (convert_bool.boolean) takes as a boolean."""
    try:
        boolean(value.strip() if isinstance(value, str) else value)
    except TypeError:
        return False
    return True


def _given(inputs, defaults):
    """``inputs`` with the defaults for what is missing or None (a playbook passes an undefined variable as null)."""
    return dict((name, default if inputs.get(name) is None else inputs[name]) for name, default in defaults.items())


def collection_errors(inputs):
    """Problems with the collection-wide variables of site.yml among ``inputs`` (missing or None: not checked):
    ``rdma_require_devices``, ``rdma_allow_reboot``, ``rdma_allow_uneven_rails`` (booleans), ``rdma_gdr`` (true,
    false, auto), ``rdma_device_naming`` (keep, kernel, pci, guid, fallback), ``rdma_sysfs_root`` (an absolute path)
    and the shape of ``rdma_port_roles`` (its selectors are matched against each host's ports by ``rdma_facts``)."""
    inputs = dict((name, value) for name, value in inputs.items() if value is not None)
    errors = []
    if "rdma_require_devices" in inputs and not is_boolean(inputs["rdma_require_devices"]):
        errors.append("rdma_require_devices must be true or false (true fails a host without an RDMA device; false "
                      "configures it for NCCL over sockets); got %s." % _json(inputs["rdma_require_devices"]))
    if "rdma_allow_reboot" in inputs and not is_boolean(inputs["rdma_allow_reboot"]):
        errors.append("rdma_allow_reboot must be true or false (consent to reboot hosts whose firmware changes are "
                      "pending); got %s." % _json(inputs["rdma_allow_reboot"]))
    if "rdma_gdr" in inputs and str(inputs["rdma_gdr"]).strip().lower() not in GDR_MODES:
        errors.append("rdma_gdr must be true, false or auto (GPUDirect RDMA: load nvidia_peermem; auto where the NVIDIA "
                      "GPU driver is); got %s." % _json(inputs["rdma_gdr"]))
    if "rdma_allow_uneven_rails" in inputs and not is_boolean(inputs["rdma_allow_uneven_rails"]):
        errors.append("rdma_allow_uneven_rails must be true or false (true warns, instead of failing, when hosts of "
                      "one group have different numbers of compute rails); got %s." % _json(inputs["rdma_allow_uneven_rails"]))
    if "rdma_device_naming" in inputs and inputs["rdma_device_naming"] not in NAMING_POLICIES:
        errors.append("rdma_device_naming must be one of %s (the names udev gives the RDMA devices at boot); got %s."
                      % (", ".join(NAMING_POLICIES), _json(inputs["rdma_device_naming"])))
    errors.extend(port_roles.entry_errors(inputs.get("rdma_port_roles")))
    root = inputs.get("rdma_sysfs_root", "/")
    if not (isinstance(root, str) and root.startswith("/")):
        errors.append("rdma_sysfs_root must be an absolute path (/sys on a real host); got %s." % _json(inputs["rdma_sysfs_root"]))
    return errors


# the rdma_host role's inputs its rule (host_settings.profile) checks beyond the argument spec; rdma_host_gdr's
# choices are the spec's, which the same check reports
RDMA_HOST_INPUTS = ("rdma_host_memlock", "rdma_host_modules", "rdma_host_ipoib")


def role_inputs(roles):
    """The variables of ``roles`` (role names) that role_errors reads, with ``rdma_sysfs_root`` (a playbook hands
    role_errors the values of those given, and templates no other variable)."""
    prefixes = tuple("%s_" % role for role in roles or [])
    names = [name for name in list(host_paths.HOST_PATHS) + list(RDMA_HOST_INPUTS) if name.startswith(prefixes)]
    names += [condition for name, (condition, _values, _why) in host_paths.EMPTY_NEEDED_WHEN.items() if name in names]
    return names + ["rdma_sysfs_root"]


def role_errors(values):
    """Problems with the roles' inputs among ``values`` ({variable: value}, those given; None: not given) that their
    argument specs cannot see and no host is needed for, each from the rule the role itself applies later: the host
    paths (host_paths: absolute, empty only where it means something) and the rdma_host settings (memlock's form,
    the module names). A role's ``<role>_sysfs_root`` that is the collection-wide ``rdma_sysfs_root`` it defaults to
    is left to that variable's own check (collection_errors), which names what the user set."""
    values = dict((name, value) for name, value in (values or {}).items() if value is not None)
    root = values.get("rdma_sysfs_root")
    paths = dict((name, value) for name, value in values.items()
                 if not (root is not None and name.endswith("_sysfs_root") and value == root))
    errors = host_paths.errors(paths)
    given = dict((name, values[name]) for name in RDMA_HOST_INPUTS if name in values)
    if given:
        errors.extend(profile(dict({"rdma_host_memlock": UNLIMITED}, **given), False)["errors"])
    return errors


# Ansible's argument spec validation: a value that is not of the option's type (the message names the option and the
# type, not what the option takes)
_NOT_CONVERTED = re.compile(r"^argument '(?P<name>[^']+)' is of type \S+ and we were unable to convert to (?P<type>\w+)")
_TYPE_WORDS = {"float": "a number", "int": "a whole number", "bool": "true or false", "list": "a list",
               "dict": "a mapping", "str": "a string", "path": "a path", "raw": "a value"}


def spec_errors(results):
    """The results of validate_argument_spec, one per role (``argument_errors``, ``argument_spec_data``) -> one message
    per refused input, each a type error completed with what the option takes: its type in words and the first
    sentence of its description, where a range or the allowed forms are written (``health_expected_rate_gbps: 400G``
    gets "takes a number: Rate in Gb/s ... (more than 0, at most 10000)")."""
    messages = []
    for result in results or []:
        spec = result.get("argument_spec_data") or {}
        for error in result.get("argument_errors") or []:
            found = _NOT_CONVERTED.match(str(error))
            entry = spec.get(found.group("name")) if found else None
            if entry is not None:
                description = entry.get("description") or ""
                description = description[0] if isinstance(description, list) and description else description
                sentence = str(description).split(". ", maxsplit=1)[0].rstrip(".")
                error = "%s; %s takes %s%s" % (error, found.group("name"), _TYPE_WORDS.get(found.group("type"), found.group("type")),
                                               ": %s" % sentence if sentence else "")
            messages.append("Invalid role input: %s" % error)
    return messages


def device_errors(read, inputs, host):
    """Problems with the RDMA devices site.yml found on ``host``: ``read`` is the registered result of its
    ``rdma_facts`` read (run before the inputs are checked, so that one assert reports both). No message when
    ``rdma_sysfs_root`` itself is refused (collection_errors names it) or ``rdma_require_devices`` is false."""
    inputs = dict((name, value) for name, value in (inputs or {}).items() if value is not None)
    root = inputs.get("rdma_sysfs_root", "/sys")
    if not (isinstance(root, str) and root.startswith("/")):
        return []
    read = read or {}
    rdma = (read.get("ansible_facts") or {}).get("rdma")
    # the read runs with failed_when false (so that this assert reports it), which also clears its "failed": a read
    # that failed is one that returned no facts
    if rdma is None and port_roles.entry_errors(inputs.get("rdma_port_roles")):
        return []  # the read refused rdma_port_roles' shape, which collection_errors reports
    if rdma is None and "rdma_port_roles" in str(read.get("msg")):
        # what only this host's ports tell (a selector that matches nothing, a management link made compute)
        return ["%s: %s" % (host, str(read["msg"]).replace("rdma_facts: ", "", 1))]
    if rdma is None:
        return ["Reading the RDMA devices under %s on %s failed: %s" % (root, host, read.get("msg", "no message"))]
    require = inputs.get("rdma_require_devices", True)
    if not is_boolean(require) or not boolean(require.strip() if isinstance(require, str) else require):
        return []
    if rdma.get("devices"):
        return []
    return ["No RDMA device under %s/class/infiniband on %s. Check that the HCA is seated and its driver (mlx5_ib) is "
            "loaded, or set rdma_require_devices=false to configure this host for NCCL over sockets." % (root, host)]


def _flatten(value):
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in _flatten(part)]
    return [value]


def rolling_reboot_errors(inputs, is_file=os.path.isfile):
    """Problems with the rolling reboot's inputs (``rolling_reboot_*``, defaults as the playbook's); the hooks must be
    absolute paths of task files that exist on the controller (``is_file``)."""
    inputs = _given(inputs, ROLLING_REBOOT_DEFAULTS)
    errors = []
    batches = inputs["rolling_reboot_batches"]
    batch_list = list(batches) if isinstance(batches, (list, tuple)) else [batches]
    if not batch_list or any(not BATCH.match(str(b)) for b in batch_list):
        errors.append('rolling_reboot_batches takes host counts (1 or more) and shares ("1%" to "100%"), one or a list, '
                      'as serial does (default [1, "10%"], a canary then 10% at a time); got ' + _json(batches) + '.')
    fail = inputs["rolling_reboot_max_fail_percentage"]
    if not PERCENT.match(str(fail)):
        errors.append("rolling_reboot_max_fail_percentage must be an integer 0-100 (0: any failure stops the rollout); "
                      "got %s." % _json(fail))
    for name in ("rolling_reboot_timeout", "rolling_reboot_port_timeout"):
        value = inputs[name]
        if not SECONDS.match(str(value)):
            errors.append("%s must be a number of seconds, 1 or more; got %s." % (name, _json(value)))
    # an empty value (a survey left blank) is no hook, as the rolling reboot takes it
    hooks = [h for name in ("rolling_reboot_pre_tasks", "rolling_reboot_post_tasks")
             for h in _flatten([] if inputs[name] == "" else inputs[name])]
    bad = ([h for h in hooks if not isinstance(h, str)]
           + [h for h in hooks if isinstance(h, str) and not os.path.isabs(h)]
           + [h for h in hooks if isinstance(h, str) and os.path.isabs(h) and not is_file(h)])
    if bad:
        errors.append("rolling_reboot_pre_tasks and rolling_reboot_post_tasks take absolute paths of task files on the "
                      "controller; not absolute or not found: %s." % _json(bad))
    return errors


def rail_errors(facts_of, hosts, groups, allow_uneven=None):
    """Hosts of one fabric group (``infiniband``, ``roce``) whose number of compute rails differs from the group's
    most common: ``facts_of(host)`` gives a host's ``ansible_facts.rdma`` (or None), ``groups`` the inventory's.
    Returns ``{"errors": {host: [message]}, "warnings": [message]}``; with ``rdma_allow_uneven_rails`` true every
    message is a warning."""
    counts = {}
    for group in port_roles.GROUP_LINK_LAYER:
        members = set((groups or {}).get(group) or [])
        for host in hosts or []:
            rdma = facts_of(host) if host in members else None
            plan = (rdma or {}).get("ports_by_role") if isinstance(rdma, dict) else None
            # a host whose compute ports are the other fabric's (InfiniBand compute, RoCE storage) has no rails here
            # a host without RDMA devices (rdma_require_devices false: NCCL over sockets) has no rails either
            if plan is not None and rdma.get("devices") and plan.get("compute_link_layer") in (
                    None, port_roles.GROUP_LINK_LAYER[group]):
                counts.setdefault(group, {})[host] = len(plan.get("compute") or [])
    allow = allow_uneven is not None and is_boolean(allow_uneven) and boolean(
        allow_uneven.strip() if isinstance(allow_uneven, str) else allow_uneven)
    errors, warnings = port_roles.rail_count_errors(counts, allow)
    return {"errors": errors, "warnings": warnings}
