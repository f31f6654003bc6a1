"""The `/status` snapshot: everything a parent (or a monitor) needs to know halo is well.

Secrets never leave: the config snapshot masks every secret-looking key and the password
part of any URL, whatever the settings model thinks is secret.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from halo import VERSION
from halo.runtime.app import Halo
from transcripts.audit import is_secret_key

MASK = "**********"
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]+)@", re.I)


def mask_secrets(value: Any) -> Any:
    """A copy with secret-looking string values masked (the key stays, so a parent sees it is
    set) and URL passwords replaced. Numbers pass: `history_token_budget` is no secret."""
    if isinstance(value, Mapping):
        return {
            k: MASK if is_secret_key(str(k)) and isinstance(v, str) and v else mask_secrets(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str):
        return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", value)
    return value


async def status_snapshot(halo: Halo) -> dict[str, Any]:
    settings = halo.settings
    services = halo.services
    paths = settings.paths
    pending = len(await services.pairing.list_pending())
    snapshot: dict[str, Any] = {
        "ok": True,
        "version": VERSION,
        "started_at": datetime.fromtimestamp(halo.started_at, UTC).isoformat(),
        "uptime_seconds": round(time.time() - halo.started_at, 1),
        "halo_home": {
            "home": str(paths.home),
            "config": str(paths.config_file),
            "soul": str(paths.soul),
            "members": str(paths.members),
            "policies": str(paths.policies),
            "transcripts": str(paths.transcripts),
            "memory": str(paths.scopes),
            "halo_db": str(paths.halo_db),
            "events_log": str(paths.events_log),
        },
        "provider": mask_secrets(
            {
                "name": settings.llm.provider,
                "model": settings.llm.model if settings.llm.provider != "none" else None,
                "base_url": settings.llm.base_url,
                "configured": services.model is not None,
            }
        ),
        "adapters": mask_secrets(halo.adapter_status()),
        "semantic": mask_secrets(services.semantic.status()),
        "distillation": mask_secrets(services.memory.status()),
        "graph_memory": mask_secrets(services.graph.status()) if services.graph else {"enabled": False},
        "pairing": {"pending": pending},
        "queues": {
            "gateway_background_tasks": halo.gateway.background_tasks,
            "busy_scopes": halo.gateway.busy_scopes,
            "pending_pairing_requests": pending,
            # halo's outbox: messages waiting for (or refused by) their platform
            "outbox_pending": services.delivery.counts["pending"],
            "outbox_failed": services.delivery.counts["failed"],
        },
        "policy": {"policies": len(services.policy.policies), "members": len(services.family.members)},
        "config": mask_secrets(settings.redacted()),
    }
    snapshot["problems"] = _problems(snapshot)
    return snapshot


def _problems(snapshot: Mapping[str, Any]) -> list[str]:
    """Plain sentences for the dashboard's health line; empty when all is well."""
    problems = []
    if not snapshot["provider"]["configured"]:
        problems.append("No language model is configured (llm.provider): halo answers commands only.")
    for name, state in snapshot["adapters"].items():
        if isinstance(state, Mapping):
            if state.get("last_error"):
                problems.append(f"{name}: {state['last_error']}")
            elif state.get("connected") is False:
                problems.append(f"{name} is not connected.")
    for scope_id in snapshot["distillation"]["failing"]:
        jobs = snapshot["distillation"]["scopes"].get(scope_id, {})
        errors = "; ".join(f"{job}: {state['last_error']}" for job, state in jobs.items() if state.get("last_error"))
        problems.append(f"memory of {scope_id} is not being updated ({errors or 'failed'}).")
    semantic = snapshot["semantic"]
    if semantic["last_error"]:
        problems.append(f"semantic sync: {semantic['last_error']}")
    if semantic["problem"]:
        problems.append(f"semantic recall: {semantic['problem']}")
    graph = snapshot["graph_memory"]
    if not graph["enabled"] and graph.get("reason") and not graph["reason"].startswith("disabled"):
        problems.append(f"graph memory is off: {graph['reason']}")
    for scope_id in graph.get("failing", []):
        problems.append(f"graph memory of {scope_id} is not being updated ({graph['scopes'][scope_id]['last_error']}).")
    return problems
