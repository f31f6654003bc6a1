"""The OpenAPI 3.0 document of the admin server, served at `/openapi.json`.

Written by hand so the contract reads as a contract; a test holds it to the route table
(every route documented, every documented path routed) and schemathesis holds the
handlers to it. Adapters that serve pages on the same server add their own paths
(`openapi_paths()`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from admin_api.routes.files import NUMBER_PATTERN
from admin_api.routes.pairing import CODE_PATTERN
from halo import VERSION
from halo.family.scope_admin import SCOPE_ID_PATTERN

JSON = "application/json"
Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    return {**schema, "nullable": True}


def json_body(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def error(description: str) -> Schema:
    return json_body(ref("Error"), description)


BAD_SCOPE = error("The scope id cannot be a scope (400)")
NO_SCOPE = error("halo has no session, transcript or memory for this scope, and halo.yaml does not name it")
BAD_LINES = error("`lines` is not a whole number from 1 to 1000, or scopeId is missing or malformed")

TOKEN_SECURITY: list[dict[str, list[str]]] = [{}, {"adminToken": []}]  # this machine, or the token


def operation(
    access: str,
    summary: str,
    responses: Mapping[str, Schema],
    *,
    description: str = "",
    parameters: list[Schema] | None = None,
    request_body: Schema | None = None,
    tags: list[str] | None = None,
) -> Schema:
    """One operation, with the refusals its access level implies."""
    op: Schema = {"summary": summary, "x-access": access, "responses": dict(responses)}
    who = {
        "anyone": "Anyone may call this.",
        "token": "A parent's credential, from anywhere (this machine included): `Authorization: Bearer "
        "<admin.token>` or a parent's own web_token, or the dashboard's session cookie (from the one-time "
        "login link `halo serve` and `halo dashboard` print). A child's or colleague's token is 403.",
        "loopback": "Only from the machine halo runs on (socket peer 127.0.0.0/8 or ::1), and with a parent's "
        "credential as for the other admin routes.",
        "member": "As a family member: `Authorization: Bearer <web_token>`, or the dashboard's session cookie "
        "(as the local owner). The policy decides what that member may see.",
    }[access]
    op["description"] = f"{description}\n\n{who}".strip()
    if tags:
        op["tags"] = tags
    if parameters:
        op["parameters"] = parameters
    if request_body:
        op["requestBody"] = request_body
    if access == "token":
        op["security"] = TOKEN_SECURITY
        op["responses"].setdefault("401", error("No parent's credential"))
        op["responses"].setdefault("403", error("A child's or colleague's token"))
    elif access == "loopback":
        op["security"] = TOKEN_SECURITY
        op["responses"].setdefault("401", error("No parent's credential"))
        op["responses"].setdefault("403", error("Not from this machine, or a child's or colleague's token"))
    elif access == "member":
        op["security"] = [{"memberToken": []}, {"dashboardSession": []}]
        op["responses"].setdefault("401", error("No member: send a web_token, or sign in to the dashboard"))
    else:
        op["security"] = []
    return op


SCOPE_PATH: Schema = {
    "name": "scopeId",
    "in": "path",
    "required": True,
    "description": "`<platform>:<chat id>`, e.g. `telegram:123456`, `web:mom`",
    "schema": {"type": "string", "pattern": f"^(?:{SCOPE_ID_PATTERN})$"},
    "example": "web:mom",
}
SCOPE_QUERY: Schema = {**SCOPE_PATH, "in": "query"}
LINES: Schema = {
    "name": "lines",
    "in": "query",
    "required": False,
    "description": "how many of the newest records (default 50)",
    "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
}

NAME: Schema = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"\S"}

SCHEMAS: dict[str, Schema] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {"error": {"type": "string"}},
    },
    "Health": {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean", "enum": [True]}}},
    "Backup": {
        "type": "object",
        "required": ["file", "bytes", "createdAt"],
        "properties": {"file": {"type": "string"}, "bytes": {"type": "integer"}, "createdAt": {"type": "string"}},
    },
    "BackupMade": {
        "type": "object",
        "required": ["file", "files", "bytes"],
        "properties": {"file": {"type": "string"}, "files": {"type": "integer"}, "bytes": {"type": "integer"}},
    },
    "Status": {
        "type": "object",
        "required": [
            "ok",
            "version",
            "started_at",
            "uptime_seconds",
            "halo_home",
            "provider",
            "adapters",
            "semantic",
            "distillation",
            "pairing",
            "queues",
            "policy",
            "config",
            "problems",
        ],
        "properties": {
            "ok": {"type": "boolean"},
            "version": {"type": "string"},
            "started_at": {"type": "string", "format": "date-time"},
            "uptime_seconds": {"type": "number", "minimum": 0},
            "halo_home": {"type": "object", "additionalProperties": {"type": "string"}},
            "provider": {
                "type": "object",
                "required": ["name", "configured"],
                "properties": {
                    "name": {"type": "string"},
                    "model": nullable({"type": "string"}),
                    "base_url": nullable({"type": "string"}),
                    "configured": {"type": "boolean"},
                },
            },
            "adapters": {
                "type": "object",
                "description": "each adapter's own state: connected, last error, counters",
                "additionalProperties": {"type": "object"},
            },
            "semantic": {
                "type": "object",
                "required": [
                    "enabled",
                    "mode",
                    "problem",
                    "running",
                    "runs",
                    "failures",
                    "last_success",
                    "last_error",
                    "embedder",
                    "scopes",
                ],
                "description": "the semantic index: its sync scheduler's health and each scope's lag",
                "properties": {
                    "enabled": {"type": "boolean"},
                    "mode": {"type": "string", "enum": ["off", "hybrid", "starting", "full-text only"]},
                    "problem": nullable({"type": "string", "description": "why recall is less than hybrid"}),
                    "running": {"type": "boolean", "description": "the sync schedule is running"},
                    "runs": {"type": "integer", "minimum": 0},
                    "failures": {"type": "integer", "minimum": 0},
                    "last_run": nullable({"type": "string", "format": "date-time"}),
                    "last_success": nullable({"type": "string", "format": "date-time"}),
                    "last_error": nullable({"type": "string"}),
                    "embedder": {"type": "object", "description": "name, model, state, error (and dim once loaded)"},
                    "scopes": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["scope_id", "last_sync", "last_error", "lag_seconds"],
                            "properties": {
                                "scope_id": {"type": "string"},
                                "last_sync": nullable({"type": "string", "format": "date-time"}),
                                "last_error": nullable({"type": "string"}),
                                "lag_seconds": {"type": "number", "minimum": 0},
                            },
                        },
                    },
                },
            },
            "distillation": {
                "type": "object",
                "required": ["enabled", "every_n_items", "extractor", "quiet_minutes", "running", "failing", "scopes"],
                "properties": {
                    "enabled": {"type": "boolean"},
                    "every_n_items": {"type": "integer"},
                    "extractor": {"type": "string", "enum": ["deterministic", "llm"]},
                    "quiet_minutes": {"type": "number"},
                    "running": {"type": "array", "items": {"type": "string"}, "description": "scopes in a run now"},
                    "failing": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "scopes whose last run failed",
                    },
                    "scopes": {
                        "type": "object",
                        "description": "per scope id, per job (distill, extract): watermark "
                        "(transcript byte offset), runs, items, last run and "
                        "success, last error, failures, next retry",
                        "additionalProperties": {"type": "object", "additionalProperties": {"type": "object"}},
                    },
                },
            },
            "pairing": {
                "type": "object",
                "required": ["pending"],
                "properties": {"pending": {"type": "integer", "minimum": 0}},
            },
            "queues": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
            "policy": {"type": "object", "additionalProperties": {"type": "integer"}},
            "config": {"type": "object", "description": "halo.yaml and the environment, every secret masked"},
            "problems": {"type": "array", "items": {"type": "string"}},
        },
    },
    "SessionCount": {
        "type": "object",
        "required": ["scopeId", "itemCount"],
        "additionalProperties": False,
        "properties": {"scopeId": {"type": "string"}, "itemCount": {"type": "integer", "minimum": 0}},
    },
    "ScopeSummary": {
        "type": "object",
        "required": [
            "scopeId",
            "type",
            "ownerId",
            "configured",
            "itemCount",
            "transcriptLines",
            "lastActivity",
            "hasMemory",
        ],
        "properties": {
            "scopeId": {"type": "string"},
            "type": {"type": "string", "enum": ["dm", "parents_group", "family_group", "work_channel", "home"]},
            "ownerId": nullable({"type": "string"}),
            "configured": {"type": "boolean", "description": "named by halo.yaml"},
            "itemCount": {"type": "integer", "minimum": 0},
            "transcriptLines": {"type": "integer", "minimum": 0},
            "lastActivity": nullable({"type": "string", "format": "date-time"}),
            "hasMemory": {"type": "boolean"},
        },
    },
    "Decision": {
        "type": "object",
        "required": ["principal", "action", "allowed", "policyIds", "reason", "fromScope"],
        "properties": {
            "principal": {"type": "string", "description": "member id, or system:home"},
            "action": {"type": "string"},
            "allowed": {"type": "boolean"},
            "policyIds": {"type": "array", "items": {"type": "string"}},
            "reason": {"type": "string"},
            "fromScope": nullable({"type": "string"}),
        },
    },
    "PolicyStatus": {
        "type": "object",
        "required": ["actions", "members", "scopes", "policies"],
        "properties": {
            "actions": {"type": "array", "items": {"type": "string"}},
            "members": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "name", "role", "ageGroup"],
                    "properties": {
                        "id": {"type": "string"},
                        "name": {"type": "string"},
                        "role": {"type": "string"},
                        "ageGroup": nullable({"type": "string"}),
                        "safety": ref("SafetyProfile"),
                    },
                },
            },
            "scopes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["scopeId", "type", "ownerId", "decisions"],
                    "properties": {
                        "scopeId": {"type": "string"},
                        "type": {"type": "string"},
                        "ownerId": nullable({"type": "string"}),
                        "decisions": {"type": "array", "items": ref("Decision")},
                    },
                },
            },
            "policies": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "effect", "reason", "source", "line"],
                    "properties": {
                        "id": {"type": "string"},
                        "effect": {"type": "string", "enum": ["permit", "forbid"]},
                        "reason": nullable({"type": "string"}),
                        "source": {"type": "string"},
                        "line": {"type": "integer"},
                    },
                },
            },
        },
    },
    "SafetyProfile": {
        "type": "object",
        "required": ["member", "role", "guarded"],
        "description": "a member's effective age profile (halo.yaml safety.profiles); only children are guarded",
        "properties": {
            "member": {"type": "string"},
            "role": {"type": "string"},
            "guarded": {"type": "boolean"},
            "age_group": {"type": "string"},
            "model_key": {"type": "string"},
            "model": nullable({"type": "string"}),
            "tool_classes": {"type": "array", "items": {"type": "string"}},
            "max_reply_chars": {"type": "integer"},
            "blocked_topics": {"type": "array", "items": {"type": "string"}},
            "tone": {"type": "string"},
            "notify_parents_on_medium": {"type": "boolean"},
            "notify_parents_on_high": {"type": "boolean"},
            "parental_visibility": {"type": "boolean"},
            "parents_who_may_read_transcript": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Notification": {
        "type": "object",
        "required": ["id", "ts", "kind", "about", "text", "deliveredVia"],
        "properties": {
            "id": {"type": "string"},
            "ts": {"type": "string", "format": "date-time"},
            "kind": {"type": "string"},
            "about": nullable({"type": "string"}),
            "text": {"type": "string"},
            "deliveredVia": {
                "type": "array",
                "items": {"type": "string"},
                "description": "adapters that delivered it; it is in the web inbox either way",
            },
        },
    },
    "Cleared": {
        "type": "object",
        "required": ["scopeId", "cleared", "itemsRemoved"],
        "properties": {
            "scopeId": {"type": "string"},
            "cleared": {"type": "boolean"},
            "itemsRemoved": {"type": "integer", "minimum": 0},
        },
    },
    "Distilled": {
        "type": "object",
        "required": ["scopeId", "distilled", "result"],
        "properties": {
            "scopeId": {"type": "string"},
            "distilled": {"type": "boolean"},
            "result": {
                "type": "object",
                "description": "what the run read and what it changed in memory",
                "required": [
                    "fromOffset",
                    "toOffset",
                    "items",
                    "factsAdded",
                    "factsSuperseded",
                    "factsForgotten",
                    "notesAdded",
                    "skipped",
                ],
                "additionalProperties": False,
                "properties": {
                    "fromOffset": {"type": "integer", "minimum": 0, "description": "transcript byte offset"},
                    "toOffset": {"type": "integer", "minimum": 0, "description": "the new watermark"},
                    "items": {"type": "integer", "minimum": 0, "description": "transcript lines read"},
                    **{
                        k: {"type": "integer", "minimum": 0}
                        for k in ("factsAdded", "factsSuperseded", "factsForgotten", "notesAdded")
                    },
                    "skipped": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "lines the policy did not let into memory",
                    },
                },
            },
        },
    },
    "Purged": {
        "type": "object",
        "required": ["scopeId", "purged"],
        "properties": {
            "scopeId": {"type": "string"},
            "purged": {
                "type": "object",
                "required": ["sessionItems", "transcript", "memory"],
                "properties": {
                    "sessionItems": {"type": "integer", "minimum": 0},
                    "transcript": {"type": "boolean", "description": "a transcript existed and was deleted"},
                    "memory": {"type": "boolean", "description": "a memory folder (and index) existed and was deleted"},
                },
            },
        },
    },
    "Event": {
        "type": "object",
        "required": ["ts", "kind"],
        "description": "one audit log line; further keys depend on the kind",
        "properties": {"ts": {"type": "string"}, "kind": {"type": "string"}},
    },
    "TranscriptLine": {
        "type": "object",
        "required": ["id", "ts", "scope_id", "role", "text"],
        "properties": {
            "id": {"type": "string"},
            "ts": {"type": "string", "format": "date-time"},
            "scope_id": {"type": "string"},
            "role": {"type": "string", "enum": ["user", "assistant", "system", "event"]},
            "speaker": nullable({"type": "string"}),
            "target": nullable({"type": "string"}),
            "platform": nullable({"type": "string"}),
            "text": {"type": "string"},
        },
    },
    "Memory": {
        "type": "object",
        "required": ["scopeId", "exists", "text", "updatedAt", "truncated"],
        "properties": {
            "scopeId": {"type": "string"},
            "exists": {"type": "boolean"},
            "text": {"type": "string"},
            "updatedAt": nullable({"type": "string", "format": "date-time"}),
            "truncated": {"type": "boolean"},
        },
    },
    "Document": {
        "type": "object",
        "additionalProperties": False,
        "required": ["number", "name", "pages", "characters", "bytes", "type", "addedBy", "addedAt", "path"],
        "properties": {
            "number": {"type": "integer", "minimum": 1, "description": "its number in /files; stable while it exists"},
            "name": {"type": "string", "description": "the name it was sent with"},
            "pages": nullable({"type": "integer", "description": "a PDF's pages; null for text"}),
            "characters": {"type": "integer", "description": "characters of text kept"},
            "bytes": {"type": "integer", "description": "size of the original (not kept)"},
            "type": {"type": "string", "example": "application/pdf"},
            "addedBy": {"type": "string", "description": "who sent it"},
            "addedAt": {"type": "string", "format": "date-time"},
            "path": {
                "type": "string",
                "description": "the text's file in the scope's memory folder",
                "example": "files/001-trip.pdf.md",
            },
        },
    },
    "PairingRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["code", "platform", "userId", "displayName", "username", "requestedAt", "expiresAt"],
        "properties": {
            "code": {"type": "string", "description": "what the newcomer was told; approve or deny with it"},
            "platform": {"type": "string", "example": "telegram"},
            "userId": {"type": "string", "description": "the newcomer's account id on that platform"},
            "displayName": nullable({"type": "string"}),
            "username": nullable({"type": "string"}),
            "requestedAt": {"type": "string", "format": "date-time"},
            "expiresAt": {"type": "string", "format": "date-time", "description": "an hour after requestedAt"},
        },
    },
    "Task": {
        "type": "object",
        "additionalProperties": False,
        "required": ["number", "project", "title", "status", "owner", "scopeId", "createdAt", "updatedAt", "notes"],
        "properties": {
            "number": {"type": "integer", "minimum": 1, "description": "what /task start N and friends name"},
            "project": {"type": "string", "example": "ContextForge"},
            "title": {"type": "string"},
            "status": {"type": "string", "enum": ["todo", "doing", "blocked", "done"]},
            "owner": nullable({"type": "string", "description": "who added or started it"}),
            "scopeId": {"type": "string", "description": "the work channel it belongs to", "example": "discord:3001"},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
            "notes": {
                "type": "array",
                "description": "the task's log, oldest first",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["at", "event", "text", "by"],
                    "properties": {
                        "at": {"type": "string", "format": "date-time"},
                        "event": {
                            "type": "string",
                            "enum": ["created", "started", "note", "blocked", "done", "reopened"],
                        },
                        "text": {"type": "string", "description": "a note, why it is blocked, or a done note"},
                        "by": nullable({"type": "string"}),
                    },
                },
            },
        },
    },
    "Member": {
        "type": "object",
        "required": ["id", "name", "role", "ageGroup"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "role": {"type": "string", "enum": ["parent", "child", "colleague"]},
            "ageGroup": nullable({"type": "string", "enum": ["young_child", "adolescent", None]}),
        },
    },
    "Approval": {
        "description": "who the newcomer is; an age group only for a child (young_child when left out)",
        "oneOf": [
            {
                "type": "object",
                "required": ["role", "name"],
                "properties": {
                    "role": {"type": "string", "enum": ["child"]},
                    "name": NAME,
                    "ageGroup": nullable({"type": "string", "enum": ["young_child", "adolescent", None]}),
                },
            },
            {
                "type": "object",
                "required": ["role", "name"],
                "properties": {
                    "role": {"type": "string", "enum": ["parent", "colleague"]},
                    "name": NAME,
                    "ageGroup": nullable({"type": "string", "enum": [None]}),
                },
            },
        ],
        "example": {"role": "child", "name": "Meera", "ageGroup": "adolescent"},
    },
    "Approved": {
        "type": "object",
        "required": ["code", "approved", "member"],
        "properties": {"code": {"type": "string"}, "approved": {"type": "boolean"}, "member": ref("Member")},
    },
    "Denied": {
        "type": "object",
        "required": ["code", "denied"],
        "properties": {"code": {"type": "string"}, "denied": {"type": "boolean"}},
    },
}

CODE_PATH: Schema = {
    "name": "code",
    "in": "path",
    "required": True,
    "description": "the pairing code the newcomer was given",
    "schema": {"type": "string", "pattern": f"^{CODE_PATTERN}$"},
    "example": "K7PQ2MZX",
}
PAIRING_REFUSED = error("The code is malformed, or the body is not a valid approval")
NO_REQUEST = error("No open request has that code: never made, already decided, or expired")

PATHS: dict[str, dict[str, Schema]] = {
    "/healthz": {
        "get": operation("anyone", "Is halo up?", {"200": json_body(ref("Health"), "halo is up")}, tags=["health"])
    },
    "/status": {
        "get": operation(
            "token",
            "Uptime, version, paths, config (secrets masked), adapters, provider, sync and queues",
            {"200": json_body(ref("Status"), "the snapshot")},
            tags=["health"],
        )
    },
    "/sessions": {
        "get": operation(
            "token",
            "Scopes with a stored session or a transcript",
            {"200": json_body({"type": "array", "items": {"type": "string"}}, "scope ids")},
            tags=["scopes"],
        )
    },
    "/sessions-with-counts": {
        "get": operation(
            "token",
            "The same scopes with the number of items in each session",
            {"200": json_body({"type": "array", "items": ref("SessionCount")}, "scope ids and item counts")},
            tags=["scopes"],
        )
    },
    "/scopes": {
        "get": operation(
            "token",
            "Configured and active scopes with item counts, transcript size and last activity",
            {"200": json_body({"type": "array", "items": ref("ScopeSummary")}, "one entry a scope")},
            tags=["scopes"],
        )
    },
    "/sessions/{scopeId}/clear": {
        "post": operation(
            "token",
            "Clear the derived session state; the transcript is kept",
            {"200": json_body(ref("Cleared"), "cleared"), "400": BAD_SCOPE, "404": NO_SCOPE},
            parameters=[SCOPE_PATH],
            tags=["scopes"],
        )
    },
    "/sessions/{scopeId}/distill": {
        "post": operation(
            "token",
            "Run memory distillation for the scope now",
            {
                "200": json_body(ref("Distilled"), "distilled"),
                "400": BAD_SCOPE,
                "404": NO_SCOPE,
                "409": error("Distillation is disabled (memory.distillation_enabled: false)"),
            },
            description="Waits for a run in progress, then reads the transcript from the watermark on. Audited.",
            parameters=[SCOPE_PATH],
            tags=["scopes"],
        )
    },
    "/sessions/{scopeId}/purge": {
        "post": operation(
            "loopback",
            "Delete the scope's session, transcript, memory folder and index, for good",
            {
                "200": json_body(ref("Purged"), "what was deleted"),
                "400": error("confirm is missing or differs from the scope id, or the scope id is malformed"),
                "404": NO_SCOPE,
            },
            description="Audited. `confirm` must repeat the scope id exactly.",
            parameters=[
                SCOPE_PATH,
                {
                    "name": "confirm",
                    "in": "query",
                    "required": True,
                    "description": "the scope id again, to confirm",
                    "schema": {"type": "string"},
                    "example": "web:mom",
                },
            ],
            tags=["scopes"],
        )
    },
    "/scopes/{scopeId}/memory": {
        "get": operation(
            "token",
            "The scope's MEMORY.md as it is on disk (audited)",
            {"200": json_body(ref("Memory"), "the file, or exists: false"), "400": BAD_SCOPE, "404": NO_SCOPE},
            parameters=[SCOPE_PATH],
            tags=["memory"],
        )
    },
    "/scopes/{scopeId}/files": {
        "get": operation(
            "token",
            "The documents members sent in the scope, kept as text (audited)",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["scopeId", "files"],
                        "properties": {
                            "scopeId": {"type": "string"},
                            "files": {"type": "array", "items": ref("Document")},
                        },
                    },
                    "by number",
                ),
                "400": BAD_SCOPE,
                "404": NO_SCOPE,
            },
            parameters=[SCOPE_PATH],
            tags=["memory"],
        )
    },
    "/scopes/{scopeId}/files/{number}": {
        "delete": operation(
            "token",
            "Delete one document: its text, and its chunks in the scope's index",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["scopeId", "removed"],
                        "properties": {"scopeId": {"type": "string"}, "removed": ref("Document")},
                    },
                    "the document that was deleted",
                ),
                "400": error("The scope id or the number is malformed"),
                "404": error("No such scope, or the scope has no document of that number"),
            },
            description="Audited as `document_removed`. Conversations that mentioned the document are kept.",
            parameters=[
                SCOPE_PATH,
                {
                    "name": "number",
                    "in": "path",
                    "required": True,
                    "description": "the document's number, as the list gives it",
                    "schema": {"type": "string", "pattern": f"^{NUMBER_PATTERN}$"},
                    "example": "1",
                },
            ],
            tags=["memory"],
        )
    },
    "/memory/graph": {
        "get": operation(
            "token",
            "The scope's graph memory: entities, and facts with when each held (audited)",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "required": ["scopeId", "enabled", "entities", "facts"],
                        "properties": {
                            "scopeId": {"type": "string"},
                            "enabled": {"type": "boolean"},
                            "reason": {"type": "string", "nullable": True, "description": "why graph memory is off"},
                            "entities": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}, "summary": {"type": "string"}},
                                },
                            },
                            "facts": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "fact": {"type": "string"},
                                        "source": {"type": "string"},
                                        "target": {"type": "string"},
                                        "validAt": {"type": "string", "nullable": True},
                                        "invalidAt": {"type": "string", "nullable": True},
                                        "current": {"type": "boolean"},
                                    },
                                },
                            },
                        },
                    },
                    "newest facts first; invalidAt set: superseded",
                ),
                "400": BAD_SCOPE,
                "404": NO_SCOPE,
            },
            parameters=[{**SCOPE_QUERY, "required": True}],
            tags=["memory"],
        )
    },
    "/policy/status": {
        "get": operation(
            "token",
            "Every configured scope: each member's decision for each action, with policy ids and reason",
            {"200": json_body(ref("PolicyStatus"), "the table")},
            tags=["policy"],
        )
    },
    "/events": {
        "get": operation(
            "token",
            "Audit events about one scope (where it happened, or what a decision was about)",
            {
                "200": json_body({"type": "array", "items": ref("Event")}, "oldest first"),
                "400": BAD_LINES,
                "404": NO_SCOPE,
            },
            parameters=[{**SCOPE_QUERY, "required": True}, LINES],
            tags=["events"],
        )
    },
    "/events/tail": {
        "get": operation(
            "loopback",
            "The newest audit events",
            {"200": json_body({"type": "array", "items": ref("Event")}, "oldest first"), "400": BAD_LINES},
            parameters=[LINES],
            tags=["events"],
        )
    },
    "/transcripts/tail": {
        "get": operation(
            "loopback",
            "The newest lines of one scope's transcript (audited)",
            {
                "200": json_body({"type": "array", "items": ref("TranscriptLine")}, "oldest first"),
                "400": BAD_LINES,
                "404": NO_SCOPE,
            },
            parameters=[{**SCOPE_QUERY, "required": True}, LINES],
            tags=["events"],
        )
    },
    "/pairing/requests": {
        "get": operation(
            "token",
            "Pending pairing requests, oldest first (expired ones are not listed)",
            {"200": json_body({"type": "array", "items": ref("PairingRequest")}, "pending requests")},
            tags=["pairing"],
        )
    },
    "/pairing/requests/{code}/approve": {
        "post": operation(
            "token",
            "Approve a newcomer as a member",
            {
                "200": json_body(ref("Approved"), "approved"),
                "400": PAIRING_REFUSED,
                "404": NO_REQUEST,
                "415": error("The body is not declared application/json"),
            },
            description="Adds them to halo.yaml (the previous file is kept as halo.yaml.bak), welcomes them, "
            "and audits `pairing_approved` with who approved.",
            parameters=[CODE_PATH],
            request_body={"required": True, "content": {JSON: {"schema": ref("Approval")}}},
            tags=["pairing"],
        )
    },
    "/pairing/requests/{code}/deny": {
        "post": operation(
            "token",
            "Deny a pairing request",
            {"200": json_body(ref("Denied"), "denied"), "400": PAIRING_REFUSED, "404": NO_REQUEST},
            description="The sender is not told and gets no further replies. An expired request can still be "
            "denied. Audited as `pairing_denied`.",
            parameters=[CODE_PATH],
            tags=["pairing"],
        )
    },
    "/tasks": {
        "get": operation(
            "token",
            "The work task list, by number",
            {
                "200": json_body({"type": "array", "items": ref("Task")}, "tasks with their logs"),
                "400": error("`status` is not a task status, or `project` is too long"),
            },
            parameters=[
                {
                    "name": "project",
                    "in": "query",
                    "required": False,
                    "description": "only this project (any case)",
                    "schema": {"type": "string", "maxLength": 80},
                },
                {
                    "name": "status",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["todo", "doing", "blocked", "done"]},
                },
            ],
            tags=["tasks"],
        )
    },
    "/family/transcripts": {
        "get": operation(
            "member",
            "The DM transcripts this member may read",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "required": ["member", "scopes"],
                        "properties": {
                            "member": {"type": "string"},
                            "scopes": {"type": "array", "items": {"type": "string"}},
                        },
                    },
                    "scope ids",
                )
            },
            tags=["family"],
        )
    },
    "/family/transcript": {
        "get": operation(
            "member",
            "A DM transcript, as the read_transcript policy allows this member (audited)",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "required": ["scopeId", "owner", "lines"],
                        "properties": {
                            "scopeId": {"type": "string"},
                            "owner": nullable({"type": "string"}),
                            "lines": {"type": "array", "items": ref("TranscriptLine")},
                        },
                    },
                    "oldest first",
                ),
                "400": BAD_LINES,
                "403": error("The policy does not let this member read that transcript (the refusal is audited)"),
            },
            description="A parent reads a young child's DM, an adolescent's only with parental_visibility, never "
            "another parent's. A scope halo holds nothing of is refused or empty, never a 404.",
            parameters=[{**SCOPE_QUERY, "required": True}, LINES],
            tags=["family"],
        )
    },
    "/family/notifications": {
        "get": operation(
            "member",
            "This member's notifications (safety alerts), delivered by an adapter or not",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "required": ["member", "notifications"],
                        "properties": {
                            "member": {"type": "string"},
                            "notifications": {"type": "array", "items": ref("Notification")},
                        },
                    },
                    "oldest first",
                ),
                "400": BAD_LINES,
            },
            parameters=[LINES],
            tags=["family"],
        )
    },
    "/": {
        "get": operation(
            "token",
            "The dashboard",
            {
                "200": {"description": "the dashboard page", "content": {"text/html": {"schema": {"type": "string"}}}},
                "401": {
                    "description": "Not from this machine and no valid admin token: a browser (Accept: text/html) "
                    "gets the sign-in page, which holds no data; anything else the JSON error",
                    "content": {JSON: {"schema": ref("Error")}, "text/html": {"schema": {"type": "string"}}},
                },
            },
            tags=["dashboard"],
        )
    },
    "/home/observations": {
        "get": operation(
            "token",
            "What the house last reported: each entity's current state, and the newest observations",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "required": ["states", "observations"],
                        "properties": {
                            "states": {"type": "array", "items": {"type": "object"}},
                            "observations": {"type": "array", "items": {"type": "object"}},
                        },
                    },
                    "states by entity; observations newest first",
                ),
                "400": BAD_LINES,
            },
            parameters=[LINES],
            tags=["home"],
        )
    },
    "/home/rules": {
        "get": operation(
            "token",
            "The home rules, each with when it last fired and what became of its last event",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "required": ["rules", "queued"],
                        "properties": {
                            "rules": {"type": "array", "items": {"type": "object"}},
                            "queued": {"type": "integer", "description": "messages waiting out quiet hours"},
                        },
                    },
                    "in halo.yaml order",
                )
            },
            tags=["home"],
        )
    },
    "/login": {
        "get": operation(
            "anyone",
            "Sign in to the dashboard with a one-time login link",
            {
                "303": {"description": "signed in: the session cookie is set and the browser goes to /"},
                "401": error("The link was used already, has expired, or was never made"),
            },
            description="`halo serve` prints the link at start and `halo dashboard` prints a fresh one. The token "
            "works once, for 15 minutes; the cookie (HttpOnly, SameSite=Strict) lasts 12 hours or until halo "
            "restarts.",
            parameters=[{"name": "token", "in": "query", "required": True, "schema": {"type": "string"}}],
            tags=["dashboard"],
        )
    },
    "/logout": {
        "post": operation(
            "anyone",
            "End this browser's dashboard session",
            {"200": json_body({"type": "object", "properties": {"signedOut": {"type": "boolean"}}}, "signed out")},
            tags=["dashboard"],
        )
    },
    "/backups": {
        "get": operation(
            "loopback",
            "The workspace archives kept in HALO_HOME/backups",
            {"200": json_body({"type": "array", "items": ref("Backup")}, "oldest first")},
            tags=["backups"],
        ),
        "post": operation(
            "loopback",
            "Archive the whole workspace into HALO_HOME/backups now",
            {"201": json_body(ref("BackupMade"), "the archive made")},
            description="The same archive as `halo export`; the oldest beyond `backups.keep` are deleted.",
            tags=["backups"],
        ),
    },
    "/openapi.json": {
        "get": operation(
            "anyone",
            "This document",
            {"200": json_body({"type": "object"}, "OpenAPI 3.0")},
            tags=["dashboard"],
        )
    },
}


def build_spec(extra_paths: Mapping[str, Mapping[str, Schema]] | None = None) -> dict[str, Any]:
    """The document, with paths other parts of the server (adapters) contribute."""
    paths = copy.deepcopy(PATHS)
    for path, operations in (extra_paths or {}).items():
        paths.setdefault(path, {}).update(copy.deepcopy(dict(operations)))
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "halo admin API",
            "version": VERSION,
            "description": "Look inside halo and steer it (ARCHITECTURE §7). Errors are JSON "
            '`{"error": "…"}`. "This machine" is the socket peer address; forwarded-for '
            "headers are never trusted, and a request from this machine that names another "
            "host or comes from another site's page counts as remote.",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": copy.deepcopy(SCHEMAS),
            "securitySchemes": {
                "adminToken": {"type": "http", "scheme": "bearer", "description": "admin.token from halo.yaml"},
                "memberToken": {"type": "http", "scheme": "bearer", "description": "a member's web_token"},
                "dashboardSession": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "halo_session",
                    "description": "from the one-time login link (GET /login?token=…)",
                },
            },
        },
    }
