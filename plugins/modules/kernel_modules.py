#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: kernel_modules
short_description: Load kernel modules now and at boot, reading their state from sysfs
version_added: "0.4.0"
description:
  - Reads whether each module is loaded from C(<sysfs_root>/module/<name>/) (C(initstate) C(live); a built-in module
    has the directory without C(initstate)), loads the others with C(modprobe NAME), reads the state again, and keeps
    the list in one C(modules-load.d) file that systemd-modules-load reads at boot.
  - In check mode nothing is loaded or written; C(modprobe -n) (dry run) still checks that every module to load is
    found, so a missing module is reported before anything changes.
  - The state comes from sysfs, not C(/proc/modules), so it follows O(sysfs_root) and works on kernels whose
    C(/proc/modules) is not there.
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  names:
    description: Module names, in load order.
    type: list
    elements: str
    required: true
  load_file:
    description: The C(modules-load.d) file listing O(names) for the next boots; omit it to load now only.
    type: path
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes
'''

EXAMPLES = r'''
- name: RDMA modules now and at boot
  hpcnet.rdma.kernel_modules:
    names: [ib_umad, ib_uverbs, rdma_ucm]
    load_file: /etc/modules-load.d/hpcnet-rdma.conf
'''

RETURN = r'''
loaded:
  description: The modules loaded after the run (in check mode, the ones already loaded), from C(<sysfs_root>/module/).
  returned: always
  type: list
  elements: str
  sample: [ib_umad, ib_uverbs, rdma_ucm]
commands:
  description: The modprobe commands run (or, in check mode, that would run).
  returned: always
  type: list
  elements: str
  sample: ["modprobe rdma_ucm"]
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcnet.rdma.plugins.module_utils.host import kernel_modules as km
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import files
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner

HEADER = ["Managed by hpcnet.rdma: kernel modules loaded at every boot (systemd-modules-load)."]


def run(module):
    params = module.params
    root, names, load_file = params["sysfs_root"], params["names"], params["load_file"]
    current = files.current(load_file) if load_file else None
    to_load, new_text = km.plan(root, names, load_file, HEADER, current)
    modprobe = module.get_bin_path("modprobe", required=True) if to_load else None
    runner = ModuleRunner(module)
    for name in to_load:
        # in check mode, modprobe's dry run: the module is found and its dependencies resolve
        argv = [modprobe, "-n", name] if module.check_mode else [modprobe, name]
        rc, out, err = runner.run(argv)
        if rc != 0:
            raise km.KernelModuleError("modprobe %s failed (exit %d): %s" % (name, rc, (err or out).strip()))
    if not module.check_mode:
        missing = [name for name in to_load if not km.loaded(root, name)]
        if missing:
            raise km.KernelModuleError("modprobe succeeded, but %s is not loaded (no %s)" % (
                ", ".join(missing), ", ".join(os.path.join(root, "module", km.sysfs_name(n)) for n in missing)))
        if new_text is not None:
            files.write_text(load_file, new_text)
    changed = bool(to_load) or new_text is not None
    return {"changed": changed, "commands": ["modprobe %s" % name for name in to_load],
            "loaded": [n for n in names if module.check_mode and km.loaded(root, n) or not module.check_mode],
            "diff": {"before": {"loaded": [n for n in names if n not in to_load], "load_file": current or ""},
                     "after": {"loaded": list(names), "load_file": new_text if new_text is not None else current or ""}}}


def main():
    module = AnsibleModule(argument_spec=dict(names=dict(type="list", elements="str", required=True),
                                              load_file=dict(type="path"),
                                              sysfs_root=dict(type="path", default="/sys")),
                           supports_check_mode=True)
    try:
        result = run(module)
    except km.KernelModuleError as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
