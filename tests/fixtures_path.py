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


# Real NCCL_DEBUG=INFO excerpts kept in this repository (public issue threads; see its SOURCES.md), in addition to
# the shared ones.
FIELD_NCCL_LOGS = REPO_ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "nccl-field"


def nccl_log_fixtures() -> list:
    """Every real NCCL log with an ``.expected.json`` beside it: ``shared/fixtures/nccl-logs`` then ``nccl-field``."""
    return sorted((shared_fixtures() / "nccl-logs").glob("*.log")) + sorted(FIELD_NCCL_LOGS.glob("*.log"))
