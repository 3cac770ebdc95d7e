#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: ofed_stack
short_description: Compare the installed RDMA stack, kernel, DKMS modules and loaded driver with the stack asked for
version_added: "0.5.0"
description:
  - Read-only. Probes what is installed (C(ofed_info -s); for DOCA the version of the profile meta-package), the
    running kernel (C(uname -r)) and the installed ones (C(/boot/vmlinuz-<release>)), C(dkms status), and the loaded
    mlx5_core driver (C(<sysfs_root>/module/mlx5_core/version)) against the one on disk for the running kernel
    (C(modinfo -k <release> -F version mlx5_core)).
  - Computes the version gate (O(provider)/O(version) installed or not, and whether another stack must be removed
    first), the kernel drift guard before an install, the DKMS check after it, and whether the installed driver
    still waits for a reboot (or an openibd restart) to load.
  - Never reports C(changed).
author:
  - hpcnet.rdma contributors (@hpcnet)
options:
  provider:
    description: The stack asked for.
    type: str
    required: true
    choices: [inbox, doca, mlnx_ofed]
  version:
    description:
      - The version asked for. DOCA versions are DOCA's (C(3.2.1)), matched against the profile meta-package's
        version (C(3.2.1-044000)); MLNX_OFED versions are the installer's (C(24.10-1.1.4.0)), matched against
        C(ofed_info -s). Ignored for C(inbox).
    type: str
  doca_package:
    description: The DOCA profile meta-package whose version tells the installed DOCA version.
    type: str
    default: doca-ofed
  allow_change:
    description: Whether another installed stack (or another version) may be removed to install this one.
    type: bool
    default: false
  kernel:
    description: The kernel release the user pins; the drift guard then requires it to be the running one.
    type: str
  packages:
    description:
      - Packages whose installed version to report in RV(packages) (C(dpkg-query), else C(rpm -q)), for example the
        inbox stack's after its install; a light query where M(ansible.builtin.package_facts) would return every
        package of the host.
    type: list
    elements: str
    default: []
  device_naming:
    description:
      - The names udev gives the RDMA devices at boot (C(rdma_device_naming)), C(keep) (the stack's own rule), or
        C(kernel) (C(mlx5_0)), C(pci) (C(ibp24s0), C(rocep12s0f1)), C(guid) or C(fallback) (onboard, PCI, GUID,
        kernel, rdma-core's default on Debian and Ubuntu). Reported in RV(naming) and RV(naming_pending); the
        module writes nothing.
    type: str
    default: keep
    choices: [keep, kernel, pci, guid, fallback]
    version_added: "0.9.0"
extends_documentation_fragment:
  - hpcnet.rdma.sysfs_root
  - hpcnet.rdma.attributes.read_only
'''

EXAMPLES = r'''
- name: Where the host stands against DOCA 3.2.1
  hpcnet.rdma.ofed_stack:
    provider: doca
    version: 3.2.1
  register: stack
'''

RETURN = r'''
installed:
  description: The installed stack, C({provider, version, ofed_info, doca_version}) (C(ofed_info -s), package manager).
  returned: always
  type: dict
  sample: {provider: doca, version: 25.10-1.7.1.0, ofed_info: "OFED-internal-25.10-1.7.1.0:", doca_version: 3.2.1-044000}
action:
  description: C(none) (installed as asked), C(install), C(change) (another stack or version goes first) or C(refuse).
  returned: always
  type: str
message:
  description: What the version gate decided, in words (the refusal names what is installed and what was asked for).
  returned: always
  type: str
kernel:
  description: C({running, installed, newest, headers}); C(headers) is whether C(/lib/modules/<running>/build/include) exists.
  returned: always
  type: dict
  sample: {running: 6.8.0-45-generic, installed: [6.8.0-45-generic], newest: 6.8.0-45-generic, headers: true}
kernel_error:
  description: Why the vendor's modules cannot be built for the running kernel (drift guard), or null.
  returned: always
  type: str
dkms:
  description: C(dkms status) rows C({module, version, kernel, arch, state, warning}).
  returned: always
  type: list
  elements: dict
dkms_error:
  description: For a vendor stack, why its DKMS module is not installed for the running kernel, or null.
  returned: always
  type: str
driver:
  description: >-
    C({loaded, loaded_version, installed_version}): the loaded mlx5_core's MODULE_VERSION (sysfs; null for the
    distribution's in-tree module) and the one on disk for the running kernel (modinfo).
  returned: always
  type: dict
packages:
  description: The installed version of each of O(packages), or null when it is not installed.
  returned: always
  type: dict
  sample: {rdma-core: 44.0-2, perftest: null}
missing_packages:
  description: The packages of O(packages) that are not installed, in the order given.
  returned: always
  type: list
  elements: str
  sample: [perftest]
  version_added: "0.7.0"
naming:
  description:
    - C({policy, rules_file, rules_current, rules_text, not_following}) for O(device_naming), whether the udev rules file
      holds the rule the policy asks for, and the RDMA devices (C(<sysfs_root>/class/infiniband)) whose names are not
      the policy's.
  returned: always
  type: dict
  version_added: "0.9.0"
naming_pending:
  description: C({from, to, rules_file}) when devices do not have the names O(device_naming) gives (the next boot renames them), else null.
  returned: always
  type: dict
  version_added: "0.9.0"
driver_pending:
  description: C({from, to}) when the installed vendor driver is not the loaded one (a reboot or openibd restart loads it), else null.
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import device_naming, ofed_stack
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import ModuleRunner


def evaluate(params, probed):
    """The probe plus the version gate, the kernel guard, the DKMS check and the driver state."""
    kernel = probed["kernel"]
    gate = ofed_stack.plan(params["provider"], params["version"], probed["installed"], params["allow_change"])
    vendor = params["provider"] in ofed_stack.VENDOR_PROVIDERS
    result = dict(probed, action=gate["action"], message=gate["message"], kernel_error=None, dkms_error=None,
                  driver_pending=ofed_stack.driver_pending(probed), changed=False)
    if vendor:
        result["kernel_error"] = ofed_stack.kernel_guard(kernel["running"], kernel["installed"], params["kernel"])
        if gate["action"] == "none":
            result["dkms_error"] = ofed_stack.dkms_guard(probed["dkms"], kernel["running"])
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            provider=dict(type="str", required=True, choices=["inbox", "doca", "mlnx_ofed"]),
            version=dict(type="str"),
            doca_package=dict(type="str", default="doca-ofed"),
            allow_change=dict(type="bool", default=False),
            kernel=dict(type="str"),
            sysfs_root=dict(type="path", default="/sys"),
            packages=dict(type="list", elements="str", default=[]),
            device_naming=dict(type="str", default="keep", choices=list(device_naming.POLICIES)),
        ),
        supports_check_mode=True,
    )
    runner = ModuleRunner(module)
    probed = ofed_stack.probe(runner, module.params["sysfs_root"], module.params["doca_package"])
    packages = ofed_stack.package_versions(runner, module.params["packages"])
    missing = [name for name, version in packages.items() if version is None]
    naming, pending = ofed_stack.naming_state(module.params["device_naming"], module.params["sysfs_root"])
    module.exit_json(packages=packages, missing_packages=missing, naming=naming, naming_pending=pending,
                     **evaluate(module.params, probed))


if __name__ == "__main__":
    main()
