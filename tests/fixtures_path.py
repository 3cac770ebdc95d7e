"""Locate the real captures the tests read: ``tests/fixtures/real/`` inside this repository.

Each area (``rdma-outputs``, ``nccl-logs``, ``qos-firmware``) has a ``SOURCES.md`` with one row per capture: where it
came from and what it shows. New real captures go there too, each with its row. ``$HPCNET_SHARED_FIXTURES`` may
point at another folder of the same layout (for example a newer copy of the team's shared captures); nothing
depends on a folder outside the clone.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
REAL_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "real"


def real_fixtures() -> Path:
    """Return the folder of real captures: ``tests/fixtures/real`` (``$HPCNET_SHARED_FIXTURES`` overrides it)."""
    override = os.environ.get("HPCNET_SHARED_FIXTURES")
    if override:
        return Path(override)
    return REAL_FIXTURES


# Real NCCL_DEBUG=INFO excerpts from public issue threads (see its SOURCES.md), read with the ones in nccl-logs.
FIELD_NCCL_LOGS = REPO_ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "nccl-field"


def nccl_log_fixtures() -> list:
    """Every real NCCL log with an ``.expected.json`` beside it: ``nccl-logs`` then ``nccl-field``."""
    return sorted((real_fixtures() / "nccl-logs").glob("*.log")) + sorted(FIELD_NCCL_LOGS.glob("*.log"))
