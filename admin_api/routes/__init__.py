"""The admin API's route table: one record per endpoint, with who may call it and what it answers.

`create_app` registers exactly these, and `/openapi.json` is generated from exactly these
(admin_api/openapi.py): each record carries its summary, parameters and the models of its
bodies, so an endpoint's documentation sits next to its handler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from admin_api.base import DEFAULT_LINES, MAX_LINES, Handler
from admin_api.guards import Access
from halo.family.scope_admin import SCOPE_ID_PATTERN

Param = dict[str, Any]  # an OpenAPI parameter object


@dataclass(frozen=True, slots=True)
class Reply:
    """One documented answer. `body` is what pydantic can describe (a model, `list[Model]`), None
    for no body; `html` adds a page. A bare string in `Route.responses` is an `Error` answer."""

    description: str
    body: Any = None
    html: bool = False


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    access: Access
    _: KW_ONLY
    summary: str
    responses: Mapping[int, Reply | str]  # the refusals `access` implies are added (401, 403)
    tag: str
    description: str = ""
    parameters: Sequence[Param] = ()
    body: Any = None  # the request body's model
    on_unauthorized: Handler | None = None  # a different answer for a refused caller


def param(name: str, where: str, schema: dict[str, Any], description: str = "", **more: Any) -> Param:
    """A parameter: `required` is true in the path and false elsewhere unless `more` says so."""
    found: Param = {"name": name, "in": where, "required": where == "path"}
    if description:
        found["description"] = description
    return {**found, "schema": schema, **more}


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
