"""simhost: a simulated NVIDIA ConnectX host (sysfs tree + read-only vendor tools) for tests and demos.

Standard library only: the test containers have python3 but not PyYAML.
"""

from .profile import ProfileError, expand, list_profiles, load
from .tree import build_tree

__all__ = ["ProfileError", "build_tree", "expand", "list_profiles", "load"]
