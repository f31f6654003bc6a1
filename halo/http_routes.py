"""An HTTP route as a record: its handler, who may call it, what it takes and answers.

The admin API's routes (admin_api/routes) and the routes an adapter serves on the same server
(the web chat) are both `Route` records, so the server registers them one way and the whole
`/openapi.json` is derived from them (admin_api/openapi.py), with the JSON bodies' schemas
taken from the pydantic models the handlers build them from. Adapters reach this module
through `halo.port`; it imports nothing of halo.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, WithJsonSchema

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Param = dict[str, Any]  # an OpenAPI parameter object

# Who may call a route (docs/ARCHITECTURE.md, "Admin API"): no credential; a parent's
# credential from anywhere; a parent's credential from this machine; any member's own
# credential (the handler answers for that member only).
Access = Literal["anyone", "token", "loopback", "member"]

Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class ApiModel(BaseModel):
    """A JSON body: every field always sent (null when unknown), and no key it does not declare."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


class Error(ApiModel):
    """Every refusal and failure: what went wrong, in a sentence."""

    error: str


@dataclass(frozen=True, slots=True)
class Reply:
    """One documented answer. `body` is what pydantic can describe (a model, `list[Model]`), None
    for no body; `html` adds a page, `event_stream` a text/event-stream. A bare string in
    `Route.responses` is an `Error` answer."""

    description: str
    body: Any = None
    html: bool = False
    event_stream: bool = False


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint. The server wraps `handler` in the check `access` names ("member" routes
    check their caller themselves); `/openapi.json` documents it unless `documented` is false
    (a platform's webhook, which is the platform's, not halo's API)."""

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
    documented: bool = True


def param(name: str, where: str, schema: dict[str, Any], description: str = "", **more: Any) -> Param:
    """A parameter: `required` is true in the path and false elsewhere unless `more` says so."""
    found: Param = {"name": name, "in": where, "required": where == "path"}
    if description:
        found["description"] = description
    return {**found, "schema": schema, **more}
