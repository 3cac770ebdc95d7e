"""Locate the real captures that live beside the repository in ``../shared/fixtures``."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_fixtures() -> Path:
    """Return the ``shared/fixtures`` folder beside the repository (``$HPCNET_SHARED_FIXTURES`` overrides it)."""
    override = os.environ.get("HPCNET_SHARED_FIXTURES")
    if override:
        return Path(override)
    return REPO_ROOT.parent / "shared" / "fixtures"
