"""The `/status` snapshot: everything a parent (or a monitor) needs to know halo is well.

Secrets never leave: the config snapshot masks every secret-looking key and the password
part of any URL, whatever the settings model thinks is secret.

The services report their own parts (`semantic`, `distillation`); their models name every key
they send today and let a new one through, so a status page never fails on a key added there.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from admin_api.models import ApiModel, Count, Number, OpenModel, Timestamp
from admin_api.needs import StatusSource
from halo import VERSION
from halo.storage.db import unreachable
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


class Provider(ApiModel):
    name: str
    model: str | None
    base_url: str | None
    configured: bool
    last_error: str | None = Field(default=None, description="the last model call's failure, until one succeeds")
    last_error_at: Timestamp | None = None


class SemanticScope(OpenModel):
    """One scope's index: its sync lag, then its sizes (or why they could not be read)."""

    scope_id: str
    last_sync: Timestamp | None
    last_error: str | None
    lag_seconds: float = Field(ge=0)


class Semantic(OpenModel):
    """The semantic index: its sync schedule's health and each scope's lag."""

    enabled: bool
    mode: Literal["off", "hybrid", "starting", "full-text only"]
    problem: str | None = Field(description="why recall is less than hybrid")
    running: bool = Field(description="the sync schedule is running")
    interval_minutes: Number
    next_run: Timestamp | None
    runs: Count
    failures: Count
    last_run: Timestamp | None
    last_success: Timestamp | None
    last_error: str | None
    last_error_at: Timestamp | None
    sqlite: dict[str, Any] = Field(description="the SQLite build: driver, versions, fts5, problem")
    embedder: dict[str, Any] = Field(description="name, model, state, error (and dim once loaded)")
    scopes: list[SemanticScope]


class DistillJob(OpenModel):
    """One scope's distill or extract job."""

    watermark: Count = Field(description="transcript byte offset read up to")
    runs: Count
    items: Count
    last_run: Timestamp | None
    last_success: Timestamp | None
    last_error: str | None
    failures: Count
    next_retry: Timestamp | None
    pending_ranges: Count


class Distillation(OpenModel):
    enabled: bool
    every_n_items: int
    extractor: Literal["deterministic", "llm"]
    quiet_minutes: Number
    running: list[str] = Field(description="scopes in a run now")
    failing: list[str] = Field(description="scopes whose last run failed")
    scopes: dict[str, dict[str, DistillJob]] = Field(description="per scope id, per job (distill, extract)")


class Pairing(ApiModel):
    pending: Count


class Storage(ApiModel):
    backend: Literal["sqlite", "postgresql"] = Field(description="where halo.db's tables are: storage.url")
    family_id: str = Field(description="the id every stored row carries")
    role: Literal["active", "standby", "alone"] = Field(
        description="PostgreSQL: this process holds the family (active) or stands by; the embedded store: alone"
    )
    epoch: int | None = Field(default=None, description="the family's epoch this process writes under, when active")
    problem: str | None = Field(default=None, description="why the database cannot be reached, when it cannot")


class Process(ApiModel):
    """One `halo serve` of those serving the family on PostgreSQL."""

    node_id: str
    host: str
    address: str = Field(description="where the others forward to it (cluster.advertise_url)")
    started_at: Timestamp
    role: Literal["active", "standby"] = Field(
        description="active: it holds the family (answers, runs the chat apps, MQTT and the schedules)"
    )
    epoch: int | None = Field(description="the family's epoch it writes under (the active one), else null")
    heartbeat_age_seconds: float = Field(ge=0, description="since its last heartbeat, by PostgreSQL's clock")
    this: bool = Field(description="the process that answered this request")


class Status(ApiModel):
    ok: bool
    version: str
    started_at: Timestamp
    uptime_seconds: float = Field(ge=0)
    halo_home: dict[str, str] = Field(
        description="HALO_HOME's paths; on PostgreSQL `events_log` names the table that keeps the audit log instead"
    )
    storage: Storage
    processes: list[Process] = Field(
        description="the processes serving the family (PostgreSQL); the embedded store: this one alone, empty"
    )
    provider: Provider
    adapters: dict[str, dict[str, Any]] = Field(description="each adapter's own state: connected, last error, counters")
    semantic: Semantic
    distillation: Distillation
    graph_memory: dict[str, Any] = Field(description="enabled, and why not; its server, runs and failing scopes")
    pairing: Pairing
    queues: dict[str, Count]
    policy: dict[str, int]
    config: dict[str, Any] = Field(description="halo.yaml and the environment, every secret masked")
    config_reload: dict[str, Any] = Field(
        description="halo.yaml reloads: the last error (the running config is kept), keys changed that need a "
        "restart, and which keys are applied live and which need a restart"
    )
    problems: list[str] = Field(description="plain sentences for the dashboard's health line; empty when all is well")


async def status_snapshot(halo: StatusSource) -> dict[str, Any]:
    settings = halo.config.current  # the live keys as last reloaded
    services = halo
    paths = settings.paths
    cluster = halo.cluster
    storage_problem = None if cluster is None else cluster.problem
    try:  # from memory when the database is away: /status says so instead of failing
        pending = len(await services.pairing.list_pending())
        processes = await _processes(halo)
    except Exception as exc:
        if not unreachable(exc):
            raise
        pending, processes = 0, []
        storage_problem = f"halo cannot reach its storage ({halo.db.backend}): {type(exc).__name__}"
    model_health = halo.model_health
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
            # the audit log: the file, or on PostgreSQL the table that holds it instead
            "events_log": str(paths.events_log) if halo.db.backend == "sqlite" else "PostgreSQL table audit_events",
        },
        "storage": {
            "backend": halo.db.backend,
            "family_id": halo.db.family_id,
            "role": "alone" if cluster is None or not cluster.started else cluster.role,
            "epoch": None if cluster is None else cluster.epoch,
            "problem": storage_problem,
        },
        "processes": processes,
        "provider": mask_secrets(
            {
                "name": settings.llm.provider,
                "model": settings.llm.model if settings.llm.provider != "none" else None,
                "base_url": settings.llm.base_url,
                "configured": services.agents.model is not None,
                "last_error": model_health.last_error,
                "last_error_at": _iso(model_health.last_error_at),
            }
        ),
        "adapters": mask_secrets(_adapters(halo)),
        "semantic": mask_secrets(services.semantic.status()),
        "distillation": mask_secrets(await services.memory.status()),
        "graph_memory": mask_secrets(services.graph.status()) if services.graph else {"enabled": False},
        "pairing": {"pending": pending},
        "queues": {
            "gateway_background_tasks": halo.gateway.background_tasks,
            "busy_scopes": halo.scope_locks.busy,
            "pending_pairing_requests": pending,
            # halo's outbox: messages waiting for (or refused by) their platform
            "outbox_pending": services.delivery.counts["pending"],
            "outbox_failed": services.delivery.counts["failed"],
        },
        "policy": {"policies": len(services.policy.policies), "members": len(services.family.members)},
        "config": mask_secrets(settings.redacted()),
        "config_reload": halo.config.status(),
    }
    snapshot["problems"] = _problems(snapshot)
    return snapshot


async def _processes(halo: StatusSource) -> list[dict[str, Any]]:
    """The family's processes on PostgreSQL (halo/cluster): role, epoch, heartbeat age."""
    if halo.cluster is None:
        return []
    here = halo.cluster.node.id
    return [
        {
            "node_id": node.id,
            "host": node.host,
            "address": node.address,
            "started_at": node.started_at.isoformat(),
            "role": node.role,
            "epoch": node.epoch,
            "heartbeat_age_seconds": round(max(node.heartbeat_age, 0.0), 2),
            "this": node.id == here,
        }
        for node in await halo.cluster.nodes()
    ]


def _adapters(halo: StatusSource) -> dict[str, Any]:
    """Each adapter's state; on a standby, the chat apps and MQTT run on the active process, so
    their state here is no problem of this one's."""
    if halo.cluster is None or not halo.cluster.started or halo.cluster.active:
        return halo.adapter_status()
    return {a.platform: {"runs_on": "the active process"} if halo.singleton(a) else a.status() for a in halo.adapters}


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat()


def _recall_problem(semantic: Mapping[str, Any]) -> str:
    """Why memory search is less than it could be, in words (the exception stays in `embedder.error`)."""
    embedder = semantic.get("embedder") or {}
    if embedder.get("state") == "unavailable":
        model = embedder.get("model") or embedder.get("name") or "its embedding model"
        return (
            f"Search by meaning is off: halo could not load {model}, so it finds memories by their words only. "
            "Set memory.semantic.model to a model folder on this computer, or let halo download it."
        )
    return f"Memory search is reduced: {semantic['problem']}"


def _problems(snapshot: Mapping[str, Any]) -> list[str]:
    """Plain sentences for the dashboard's health line; empty when all is well."""
    problems = []
    if snapshot["storage"]["problem"]:
        problems.append(f"{snapshot['storage']['problem']}: messages are refused (503) until it answers again.")
    reload = snapshot["config_reload"]
    if reload["error"]:
        problems.append(f"halo.yaml was not applied; halo runs on the previous config. {reload['error']}")
    if reload["restart_needed"]:
        changed = ", ".join(reload["restart_needed"])
        problems.append(f"halo.yaml changed {changed}: restart halo for that to take effect.")
    provider = snapshot["provider"]
    if not provider["configured"]:
        problems.append("No language model is configured (llm.provider): halo answers commands only.")
    elif provider["last_error"]:
        problems.append(
            f"The language model failed at {provider['last_error_at']}: {provider['last_error']}. "
            "People are told it cannot be reached until a call succeeds."
        )
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
        problems.append(_recall_problem(semantic))
    graph = snapshot["graph_memory"]
    if not graph["enabled"] and graph.get("reason") and not graph["reason"].startswith("disabled"):
        problems.append(f"graph memory is off: {graph['reason']}")
    for scope_id in graph.get("failing", []):
        problems.append(f"graph memory of {scope_id} is not being updated ({graph['scopes'][scope_id]['last_error']}).")
    return problems
