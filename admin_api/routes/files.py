"""A scope's documents (what members sent, kept as text in its files/): list them, delete one.
Both are audited; a deletion drops the document's chunks from the scope's index at once."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from admin_api.base import ApiError, halo_of, path_scope
from admin_api.guards import actor
from admin_api.routes import Route
from halo.media.documents import Documents
from memory.documents import StoredDocument

NUMBER_PATTERN = r"[1-9][0-9]{0,5}"
_NUMBER = re.compile(NUMBER_PATTERN)


def document_json(doc: StoredDocument) -> dict[str, Any]:
    return {
        "number": doc.number,
        "name": doc.name,
        "pages": doc.pages,
        "characters": doc.chars,
        "bytes": doc.size,
        "type": doc.mime,
        "addedBy": doc.by,
        "addedAt": doc.added.isoformat(),
        "path": doc.source,
    }


def _documents(request: web.Request) -> Documents:
    documents = halo_of(request).services.documents
    if documents is None:
        raise ApiError(404, "documents are not set up in this halo")
    return documents


async def list_files(request: web.Request) -> web.Response:
    scope = await path_scope(request)
    docs = await _documents(request).list(scope.id)
    halo_of(request).services.audit.write("admin_list_files", scope_id=scope.id, actor=actor(request), files=len(docs))
    return web.json_response({"scopeId": scope.id, "files": [document_json(d) for d in docs]})


async def delete_file(request: web.Request) -> web.Response:
    scope = await path_scope(request)
    raw = request.match_info["number"]
    if not _NUMBER.fullmatch(raw):
        raise ApiError(400, "number must be a file's number, a whole number from 1, as GET …/files lists them")
    doc = await _documents(request).remove(scope.id, int(raw), by=actor(request))
    if doc is None:
        raise ApiError(404, f"{scope.id} has no file {raw}")
    return web.json_response({"scopeId": scope.id, "removed": document_json(doc)})


ROUTES = [
    Route("GET", "/scopes/{scopeId}/files", list_files, "token"),
    Route("DELETE", "/scopes/{scopeId}/files/{number}", delete_file, "token"),
]
