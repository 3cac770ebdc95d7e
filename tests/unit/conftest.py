"""Make the repository importable as ``ansible_collections.hpcnet.rdma`` without installing it."""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "tools"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "simhost"))


def _collection_root() -> Path:
    """Return a folder holding ansible_collections/hpcnet/rdma -> REPO_ROOT."""
    # ansible-test units runs from inside a real ansible_collections tree: nothing to do there.
    if REPO_ROOT.parent.parent.name == "ansible_collections":
        return REPO_ROOT.parent.parent.parent
    base = Path(tempfile.gettempdir()) / ("hpcnet-rdma-collections-" + hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12])
    link = base / "ansible_collections" / "hpcnet" / "rdma"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(REPO_ROOT, target_is_directory=True)
        except FileExistsError:
            pass
    return base


sys.path.insert(0, str(_collection_root()))
