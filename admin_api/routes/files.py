"""A scope's documents (what members sent, kept as text in its files/): list them, delete one.
Both are audited; a deletion drops the document's chunks from the scope's index at once."""

from __future__ import annotations

import re

from aiohttp import web
from pydantic import Field

from admin_api.base import ApiError, path_scope, scope_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, Timestamp, reply
from admin_api.routes import BAD_SCOPE, NO_SCOPE, SCOPE_PATH, Reply, Route, param
from halo.media.documents import Documents
from memory.documents import StoredDocument

NUMBER_PATTERN = r"[1-9][0-9]{0,5}"
_NUMBER = re.compile(NUMBER_PATTERN)


class Document(ApiModel):
    number: int = Field(ge=1, description="its number in /files; stable while it exists")
    name: str = Field(description="the name it was sent with")
    pages: int | None = Field(description="a PDF's pages; null for text")
    characters: int = Field(description="characters of text kept")
    bytes: int = Field(description="size of the original (not kept)")
    type: str = Field(examples=["application/pdf"])
    addedBy: str = Field(description="who sent it")
    addedAt: Timestamp
    path: str = Field(description="the text's file in the scope's memory folder", examples=["files/001-trip.pdf.md"])


class DocumentList(ApiModel):
    scopeId: str
    files: list[Document] = Field(description="by number")


class RemovedDocument(ApiModel):
    scopeId: str
    removed: Document


def document(doc: StoredDocument) -> Document:
    return Document(
        number=doc.number,
        name=doc.name,
        pages=doc.pages,
        characters=doc.chars,
        bytes=doc.size,
        type=doc.mime,
        addedBy=doc.by,
        addedAt=doc.added.isoformat(),
        path=doc.source,
    )


def _documents(request: web.Request) -> Documents:
    documents = scope_desk(request).documents
    if documents is None:
        raise ApiError(404, "documents are not set up in this halo")
    return documents


async def list_files(request: web.Request) -> web.Response:
    scope = await path_scope(request)
    await scope_desk(request).take_scope(scope.id)
    docs = await _documents(request).list(scope.id)
    scope_desk(request).audit.write("admin_list_files", scope_id=scope.id, actor=actor(request), files=len(docs))
    return reply(DocumentList(scopeId=scope.id, files=[document(d) for d in docs]))


async def delete_file(request: web.Request) -> web.Response:
    scope = await path_scope(request)
    raw = request.match_info["number"]
    if not _NUMBER.fullmatch(raw):
        raise ApiError(400, "number must be a file's number, a whole number from 1, as GET …/files lists them")
    await scope_desk(request).take_scope(scope.id)
    doc = await _documents(request).remove(scope.id, int(raw), by=actor(request))
    if doc is None:
        raise ApiError(404, f"{scope.id} has no file {raw}")
    await scope_desk(request).memory_durable()  # acknowledged only once the store of record has it
    return reply(RemovedDocument(scopeId=scope.id, removed=document(doc)))


NUMBER = param(
    "number",
    "path",
    {"type": "string", "pattern": f"^{NUMBER_PATTERN}$"},
    "the document's number, as the list gives it",
    example="1",
)

ROUTES = [
    Route(
        "GET",
        "/scopes/{scopeId}/files",
        list_files,
        "token",
        summary="The documents members sent in the scope, kept as text (audited)",
        responses={200: Reply("by number", DocumentList), 400: BAD_SCOPE, 404: NO_SCOPE},
        parameters=[SCOPE_PATH],
        tag="memory",
    ),
    Route(
        "DELETE",
        "/scopes/{scopeId}/files/{number}",
        delete_file,
        "token",
        summary="Delete one document: its text, and its chunks in the scope's index",
        description="Audited as `document_removed`. Conversations that mentioned the document are kept.",
        responses={
            200: Reply("the document that was deleted", RemovedDocument),
            400: "The scope id or the number is malformed",
            404: "No such scope, or the scope has no document of that number",
        },
        parameters=[SCOPE_PATH, NUMBER],
        tag="memory",
    ),
]
