#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: rdma_host_settings
short_description: Locked-memory limits, RDMA kernel modules and nvidia_peermem of one host, in one call
version_added: "0.7.0"
description:
  - The work of the C(hpcnet.rdma.rdma_host) role. Reads the host, then checks the inputs and probes every module to
    load with C(modprobe -n) (a dry run) before anything changes, so bad input or a module that is not installed
    fails with nothing applied.
  - Writes the locked-memory limit of login sessions (O(limits_file), read by pam_limits) and of the services the
    systemd manager starts (O(systemd_file), C(DefaultLimitMEMLOCK=); the manager re-reads it with
    C(systemctl daemon-reexec), run when the file changed and systemd is PID 1; services already running keep their
    limit until they are restarted).
  - Loads the RDMA kernel modules with C(modprobe) and lists them in O(modules_load_file) for the next boots (the
    file is removed when O(modules) is empty, and O(gdr_load_file) when C(nvidia_peermem) is not wanted, so that the
    next boot loads only what is asked for; a loaded module is not unloaded);
    whether a module is loaded is read from C(<sysfs_root>/module/<name>) as M(hpcnet.rdma.kernel_modules) does.
  - GPUDirect RDMA. With O(gdr=true) or O(gdr=auto) where the NVIDIA GPU driver is loaded
    (C(<sysfs_root>/module/nvidia)), loads C(nvidia_peermem) now and at boot (O(gdr_load_file)) and checks that it is
    loaded (sysfs, or O(proc_modules)); a failed load is explained from modprobe's error and the kernel log (the cause
    and the fix). O(gdr=true) without a GPU driver is a warning, not a failure.
  - Warns when none of the login services' PAM files (O(pam_files) in O(pam_dir)) calls C(pam_limits.so) in its
    session stack, since O(limits_file) then does not apply to logins.
  - In check mode nothing is written, loaded or re-executed; the diff shows the files before and after.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  memlock:
    description: Locked-memory limit, C(unlimited) or a positive number of KiB.
    type: raw
    default: unlimited
  modules:
    description: Kernel modules to load now and at boot, in load order (a list, or names separated by commas).
    type: raw
    default: [ib_umad, ib_uverbs, rdma_ucm]
  ipoib:
    description: Also load C(ib_ipoib).
    type: bool
    default: false
  gdr:
    description: GPUDirect RDMA through C(nvidia_peermem), C(true), C(false) or C(auto) (true where the GPU driver is loaded).
    type: str
    default: auto
  limits_file:
    description: The limits.d file of the memlock limit.
    type: path
    default: /etc/security/limits.d/90-hpcnet-rdma.conf
  systemd_file:
    description: The systemd manager drop-in of C(DefaultLimitMEMLOCK=).
    type: path
    default: /etc/systemd/system.conf.d/90-hpcnet-rdma.conf
  modules_load_file:
    description: The modules-load.d file of O(modules).
    type: path
    default: /etc/modules-load.d/hpcnet-rdma.conf
  gdr_load_file:
    description: The modules-load.d file of C(nvidia_peermem).
    type: path
    default: /etc/modules-load.d/hpcnet-rdma-gdr.conf
  pam_dir:
    description: Directory of the PAM service files.
    type: path
    default: /etc/pam.d
  pam_files:
    description: The login services' PAM files to look for C(pam_limits.so) in.
    type: list
    elements: str
    default: [sshd, login]
  proc_modules:
    description: The kernel's list of loaded modules, a second witness of C(nvidia_peermem).
    type: path
    default: /proc/modules
  gpu_module:
    description: The NVIDIA GPU driver's kernel module.
    type: str
    default: nvidia
  peermem_module:
    description: The GPUDirect RDMA peer-memory module.
    type: str
    default: nvidia_peermem
  gpu_driver_rebuild:
    description: How this platform rebuilds the GPU driver, for the fix of a failed C(nvidia_peermem) load.
    type: str
  host_label:
    description: The host's name in messages (the role passes the inventory name).
    type: str
notes:
  - Check mode and diff are supported. A second run with the same options changes nothing.
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes
'''

EXAMPLES = r'''
- name: Host settings of an RDMA host
  hpcnet.rdma.rdma_host_settings:
    memlock: unlimited
    modules: [ib_umad, ib_uverbs, rdma_ucm]
    ipoib: true
    gdr: auto
  register: host_settings
'''

RETURN = r'''
state:
  description: The host's settings after the run (in check mode, as they would be), the role's C(rdma_host_state).
  returned: success
  type: dict
  sample: {memlock: unlimited, modules: [ib_umad, ib_uverbs, rdma_ucm], gdr: loaded, gpu_driver: present,
           peermem: loaded}
files:
  description: The files written or removed (in check mode, that would be).
  returned: success
  type: list
  elements: str
  sample: [/etc/security/limits.d/90-hpcnet-rdma.conf]
commands:
  description: The commands run (in check mode, that would run), C(modprobe NAME) and C(systemctl daemon-reexec).
  returned: success
  type: list
  elements: str
  sample: ["modprobe rdma_ucm"]
'''

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcnet.rdma.plugins.module_utils.host.rdma_host_apply import HostSettings, HostSettingsFailure
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import files
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner

ARGUMENT_SPEC = dict(
    memlock=dict(type="raw", default="unlimited"),
    modules=dict(type="raw", default=["ib_umad", "ib_uverbs", "rdma_ucm"]),
    ipoib=dict(type="bool", default=False),
    gdr=dict(type="str", default="auto"),
    sysfs_root=dict(type="path", default="/sys"),
    limits_file=dict(type="path", default="/etc/security/limits.d/90-hpcnet-rdma.conf"),
    systemd_file=dict(type="path", default="/etc/systemd/system.conf.d/90-hpcnet-rdma.conf"),
    modules_load_file=dict(type="path", default="/etc/modules-load.d/hpcnet-rdma.conf"),
    gdr_load_file=dict(type="path", default="/etc/modules-load.d/hpcnet-rdma-gdr.conf"),
    pam_dir=dict(type="path", default="/etc/pam.d"),
    pam_files=dict(type="list", elements="str", default=["sshd", "login"]),
    proc_modules=dict(type="path", default="/proc/modules"),
    gpu_module=dict(type="str", default="nvidia"),
    peermem_module=dict(type="str", default="nvidia_peermem"),
    gpu_driver_rebuild=dict(type="str"),
    host_label=dict(type="str"),
)


def run(module):
    host = HostSettings(module.params, ModuleRunner(module), files.write_text)
    plan = host.plan()  # reads only: bad input and a module modprobe cannot find fail here
    try:
        if not module.check_mode:
            host.apply(plan)
        state = host.state(plan, module.check_mode)
    except (HostSettingsFailure, OSError) as exc:
        module.fail_json(msg=str(exc), changed=bool(host.written or host.commands), files=host.written,
                         commands=host.commands)
    for warning in host.warnings:
        module.warn(warning)
    commands = host.commands if not module.check_mode else (
        ["systemctl daemon-reexec"] if host.reexec(plan) else []) + ["modprobe %s" % n for n in plan["to_load"]]
    return {"changed": bool(plan["changed_files"] or plan["to_load"]), "state": state,
            "files": plan["changed_files"], "commands": commands,
            "diff": [{"before_header": path, "after_header": path, "before": plan["before"][path] or "",
                      "after": plan["files"][path] or ""} for path in plan["changed_files"]]}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.params["host_label"] = module.params["host_label"] or socket.gethostname()
    try:
        result = run(module)
    except (HostSettingsFailure, OSError) as exc:  # from the plan, which reads only
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
