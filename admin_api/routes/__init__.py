"""The admin API's route table: one record per endpoint, with who may call it and what it answers.

The record types (`Route`, `Reply`) live in halo/http_routes.py, below the port, because an
adapter's routes (the web chat) are records too. `create_app` registers exactly these and the
adapters' routes, and `/openapi.json` is generated from exactly those
(admin_api/openapi.py): each record carries its summary, parameters and the models of its
bodies, so an endpoint's documentation sits next to its handler.
"""

from __future__ import annotations

from admin_api.base import DEFAULT_LINES, MAX_LINES
from halo.family.scope_admin import SCOPE_ID_PATTERN
from halo.http_routes import Param, Reply, Route, param

__all__ = ["Param", "Reply", "Route", "admin_routes", "param"]


# The parameters and refusals of admin_api.base's parsers (`path_scope`, `query_scope`, `lines_param`)
SCOPE_ID = "`<platform>:<chat id>`, e.g. `telegram:123456`, `web:mom`"
SCOPE_SCHEMA = {"type": "string", "pattern": f"^(?:{SCOPE_ID_PATTERN})$"}
SCOPE_PATH = param("scopeId", "path", SCOPE_SCHEMA, SCOPE_ID, example="web:mom")
SCOPE_QUERY = param("scopeId", "query", SCOPE_SCHEMA, SCOPE_ID, required=True, example="web:mom")
LINES = param(
    "lines",
    "query",
    {"type": "integer", "minimum": 1, "maximum": MAX_LINES, "default": DEFAULT_LINES},
    f"how many of the newest records (default {DEFAULT_LINES})",
)
BAD_SCOPE = "The scope id cannot be a scope (400)"
NO_SCOPE = "halo has no session, transcript or memory for this scope, and halo.yaml does not name it"
BAD_LINES = f"`lines` is not a whole number from 1 to {MAX_LINES}, or scopeId is missing or malformed"


def admin_routes() -> list[Route]:
    from admin_api.routes import (
        backups,
        config,
        dashboard,
        events,
        family,
        files,
        health,
        home,
        login,
        memory,
        pairing,
        policy,
        reminders,
        sessions,
        tasks,
        usage,
    )

    return [
        *health.ROUTES,
        *sessions.ROUTES,
        *policy.ROUTES,
        *events.ROUTES,
        *memory.ROUTES,
        *files.ROUTES,
        *pairing.ROUTES,
        *family.ROUTES,
        *tasks.ROUTES,
        *dashboard.ROUTES,
        *home.ROUTES,
        *login.ROUTES,
        *backups.ROUTES,
        *usage.ROUTES,
        *config.ROUTES,
        *reminders.ROUTES,
    ]
