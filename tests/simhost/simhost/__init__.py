"""simhost: a simulated NVIDIA ConnectX host (sysfs tree + vendor tools) for tests and demos.

Standard library only: the test containers have python3 but not PyYAML. The package attributes are loaded on
first use, so a simulated tool (which needs only sysfs/qos/kernelfs) does not import the profile and tree code.
"""

__all__ = ["ProfileError", "boot_profile", "booted_names", "build_tree", "expand", "list_profiles", "load"]


def __getattr__(name):
    if name in ("ProfileError", "expand", "list_profiles", "load"):
        from . import profile  # pylint: disable=import-outside-toplevel
        return getattr(profile, name)
    if name in ("build_tree", "boot_profile", "booted_names"):
        from . import tree  # pylint: disable=import-outside-toplevel
        return getattr(tree, name)
    raise AttributeError("module 'simhost' has no attribute %r" % name)
