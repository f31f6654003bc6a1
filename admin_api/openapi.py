"""The OpenAPI 3.1 document of the admin server, served at `/openapi.json`, generated.

Paths come from the route table (admin_api/routes) and the routes adapters serve on the same
server (the web chat), each operation from its `Route` record (halo/http_routes.py);
component schemas from the pydantic models the handlers build their bodies from. What an
access level implies (who may call, the 401/403 refusals, the security requirement) is said
once, here. A test holds the document to the router and schemathesis holds the handlers to
the document.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

from admin_api.routes import admin_routes
from halo import VERSION
from halo.http_routes import Access, Error, Reply, Route

JSON = "application/json"
EVENT_STREAM = "text/event-stream"
Schema = dict[str, Any]

WHO: dict[Access, str] = {
    "anyone": "Anyone may call this.",
    "token": "A parent's credential, from anywhere (this machine included): `Authorization: Bearer "
    "<admin.token>` or a parent's own web_token, or the dashboard's session cookie (from the one-time "
    "login link `halo serve` and `halo dashboard` print). A child's or colleague's token is 403.",
    "loopback": "Only from the machine halo runs on (socket peer 127.0.0.0/8 or ::1), and with a parent's "
    "credential as for the other admin routes.",
    "member": "As a family member: `Authorization: Bearer <web_token>`, or the dashboard's session cookie "
    "(as the local owner). The policy decides what that member may see.",
}
REFUSALS: dict[Access, dict[int, str]] = {
    "anyone": {},
    "token": {401: "No parent's credential", 403: "A child's or colleague's token"},
    "loopback": {401: "No parent's credential", 403: "Not from this machine, or a child's or colleague's token"},
    "member": {401: "No member: send a web_token, or sign in to the dashboard"},
}
# a parent's credential, from anywhere, this machine included: being on it is not being a parent
TOKEN_SECURITY: list[dict[str, list[str]]] = [{"adminToken": []}, {"memberToken": []}, {"dashboardSession": []}]
SECURITY: dict[Access, list[dict[str, list[str]]]] = {
    "anyone": [],
    "token": TOKEN_SECURITY,
    "loopback": TOKEN_SECURITY,
    "member": [{"memberToken": []}, {"dashboardSession": []}],
}
SECURITY_SCHEMES: Schema = {
    "adminToken": {"type": "http", "scheme": "bearer", "description": "admin.token from halo.yaml"},
    "memberToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "a member's web_token (a parent's, for the admin routes)",
    },
    "dashboardSession": {
        "type": "apiKey",
        "in": "cookie",
        "name": "halo_session",
        "description": "from the one-time login link (GET /login?token=…)",
    },
}
DESCRIPTION = (
    "Look inside halo and steer it (docs/ARCHITECTURE.md in halo's repository, section Admin API). Errors are JSON "
    '`{"error": "…"}`. "This machine" is the socket peer address; forwarded-for '
    "headers are never trusted, and a request from this machine that names another "
    "host or comes from another site's page counts as remote."
)

Key = tuple[Any, JsonSchemaMode]  # (a body type, how it is used)


class _Schemas(GenerateJsonSchema):
    """Pydantic's JSON Schema without a title on every property (its name says it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _replies(route: Route) -> dict[int, Reply]:
    """The route's answers, with the refusals its access level implies."""
    given = {status: Reply(r, Error) if isinstance(r, str) else r for status, r in route.responses.items()}
    return {**{status: Reply(text, Error) for status, text in REFUSALS[route.access].items()}, **given}


def _response(reply: Reply, schemas: Mapping[Key, Schema]) -> Schema:
    content: Schema = {}
    if reply.body is not None:
        content[JSON] = {"schema": schemas[(reply.body, "serialization")]}
    if reply.html:
        content["text/html"] = {"schema": {"type": "string"}}
    if reply.event_stream:
        content[EVENT_STREAM] = {"schema": {"type": "string"}}
    return {"description": reply.description, **({"content": content} if content else {})}


def _operation(route: Route, schemas: Mapping[Key, Schema]) -> Schema:
    replies = _replies(route)
    op: Schema = {
        "summary": route.summary,
        "description": f"{route.description}\n\n{WHO[route.access]}".strip(),
        "x-access": route.access,
        "tags": [route.tag],
        "security": SECURITY[route.access],
        "responses": {str(status): _response(replies[status], schemas) for status in sorted(replies)},
    }
    if route.parameters:
        op["parameters"] = list(route.parameters)
    if route.body is not None:
        op["requestBody"] = {"required": True, "content": {JSON: {"schema": schemas[(route.body, "validation")]}}}
    return op


def _paths(routes: Sequence[Route]) -> tuple[dict[str, Schema], dict[str, Schema]]:
    """The routes' paths and the schemas of their bodies."""
    routes = [route for route in routes if route.documented]
    wanted: dict[Key, None] = {(Error, "serialization"): None}
    for route in routes:
        wanted.update({(r.body, "serialization"): None for r in _replies(route).values() if r.body is not None})
        if route.body is not None:
            wanted[(route.body, "validation")] = None
    found, definitions = TypeAdapter.json_schemas(
        [(key, key[1], TypeAdapter(key[0])) for key in wanted],
        ref_template="#/components/schemas/{model}",
        schema_generator=_Schemas,
    )
    schemas = {key: schema for (key, _mode), schema in found.items()}
    paths: dict[str, Schema] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, schemas)
    return paths, definitions.get("$defs", {})


@functools.cache
def _admin_document() -> tuple[dict[str, Schema], dict[str, Schema]]:
    """The admin routes' part (the route table never changes)."""
    return _paths(admin_routes())


def build_spec(adapter_routes: Sequence[Route] = ()) -> dict[str, Any]:
    """The document: the admin routes and the routes the adapters serve on the same server."""
    paths, components = copy.deepcopy(_admin_document())
    if adapter_routes:
        more_paths, more_components = _paths(adapter_routes)
        clashes = {name for name in more_components if name in components and components[name] != more_components[name]}
        if clashes:
            raise ValueError(f"two different body models are both named {sorted(clashes)}: rename one")
        components.update(more_components)
        for path, operations in more_paths.items():
            paths.setdefault(path, {}).update(operations)
    return {
        "openapi": "3.1.0",
        "info": {"title": "halo admin API", "version": VERSION, "description": DESCRIPTION},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": copy.deepcopy(SECURITY_SCHEMES)},
    }
