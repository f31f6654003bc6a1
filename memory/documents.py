"""A scope's documents: what members sent, kept as text in `memory/scopes/<hash>/files/`.

Each document is one markdown file, `NNN-<name>.md`: a short header (the name it was sent
with, who sent it, when, its pages) and the text read from it. The number in the file name
is the document's number in `/files`; it does not change while the file exists, so
"/files rm 2" always means the file that was listed as 2. The file is the only record:
deleting it (by hand, with `/files rm`, from the admin API) is deleting the document, and
the semantic index drops its chunks at the next sync. The original bytes are not kept:
halo answers from the text, and the chat the document came through still has the original.

Writes happen under the scope's lock, in worker threads, through the memory's store
(memory.store: files, or rows on PostgreSQL): these methods block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from memory.scope_files import ScopeFiles
from memory.store import MemoryStore, scope_folder

FILES_DIR = "files"
_FILE = re.compile(r"^(\d{3,6})-(.+)\.md$")
_UNSAFE = re.compile(r"[^\w .,()+&'-]+")
_FIELD = re.compile(r"^- ([a-z ]+): (.*)$")
HEADER_END = "---"
MAX_NAME = 80


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """One document of a scope, as its header describes it."""

    number: int
    name: str  # as it was sent
    source: str  # "files/001-trip.pdf.md": its path in the scope folder, and its source in the index
    added: datetime
    by: str  # who sent it (a name)
    pages: int | None  # a PDF's pages; None for text
    chars: int  # characters of text kept
    size: int  # bytes of the original
    mime: str
    message_id: str | None = None  # the envelope that brought it


def safe_name(name: str) -> str:
    """A document's name as a file name part: no path, no leading dot, nothing a shell trips on."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", base).strip(" ._")[:MAX_NAME].strip(" ._")
    return cleaned or "document"


def document_number(source: str) -> int | None:
    """The number of an index source under `files/`, or None when it is not a document."""
    folder, _, file = source.partition("/")
    match = _FILE.match(file) if folder == FILES_DIR else None
    return int(match.group(1)) if match else None


def document_label(source: str) -> str | None:
    """How a recalled chunk of a document names it: `file 1 “trip.pdf”`."""
    folder, _, file = source.partition("/")
    match = _FILE.match(file) if folder == FILES_DIR else None
    return f"file {int(match.group(1))} “{match.group(2)}”" if match else None


def render(doc: StoredDocument, text: str) -> str:
    pages = f"- pages: {doc.pages}\n" if doc.pages is not None else ""
    message = f"- message: {doc.message_id}\n" if doc.message_id else ""
    return (
        f"# {doc.name}\n\n"
        f"- sent by: {doc.by}\n"
        f"- received: {doc.added.isoformat(timespec='seconds')}\n"
        f"{pages}"
        f"- characters: {doc.chars}\n"
        f"- original: {doc.size} bytes, {doc.mime} (not kept)\n"
        f"{message}"
        f"\n{HEADER_END}\n\n{text.strip()}\n"
    )


def parse(store: MemoryStore, relative: str, number: int, source: str) -> tuple[StoredDocument, str] | None:
    """The header and the text of a document file (None when it is gone). A file without
    halo's header (copied there by hand) is all text, named by its file name."""
    content = store.text(relative)
    if content is None:
        return None
    head, sep, body = content.partition(f"\n{HEADER_END}\n")
    lines = head.splitlines()
    if not sep or not lines or not lines[0].startswith("# "):  # put there by hand: all of it is text
        name = relative.rsplit("/", 1)[-1]
        match = _FILE.match(name)
        lines, body = [f"# {match.group(2) if match else name.removesuffix('.md')}"], content
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if match := _FIELD.match(line):
            fields[match.group(1)] = match.group(2).strip()
    try:
        added = datetime.fromisoformat(fields.get("received", ""))
    except ValueError:
        stamp = store.stamp(relative)
        added = datetime.fromtimestamp(stamp.mtime if stamp else 0, UTC)
    size, _, mime = fields.get("original", "").partition(" bytes, ")
    doc = StoredDocument(
        number=number,
        name=lines[0][2:].strip(),
        source=source,
        added=added,
        by=fields.get("sent by", "someone"),
        pages=_int(fields.get("pages")),
        chars=_int(fields.get("characters")) or 0,
        size=_int(size) or 0,
        mime=mime.removesuffix(" (not kept)") or "text/plain",
        message_id=fields.get("message"),
    )
    return doc, body.strip("\n")


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


class ScopeDocuments:
    """The documents of every scope, in their scopes' folders."""

    def __init__(self, files: ScopeFiles) -> None:
        self.files = files

    def folder(self, scope_id: str) -> str:
        """The documents' folder, relative to HALO_HOME."""
        return f"{scope_folder(scope_id)}{FILES_DIR}/"

    def any(self, scope_id: str) -> bool:
        """Has the scope a document (or anything in its documents' folder)?"""
        return bool(self.files.store.names(self.folder(scope_id)))

    def _paths(self, scope_id: str) -> dict[int, str]:
        folder = self.folder(scope_id)
        found: dict[int, str] = {}
        for relative in self.files.store.names(folder):
            if match := _FILE.match(relative.removeprefix(folder)):
                found[int(match.group(1))] = relative
        return found

    def _parse(self, scope_id: str, number: int, relative: str) -> tuple[StoredDocument, str] | None:
        return parse(self.files.store, relative, number, relative.removeprefix(scope_folder(scope_id)))

    def list(self, scope_id: str) -> list[StoredDocument]:
        """Every document of the scope, by number."""
        docs = []
        for number, relative in sorted(self._paths(scope_id).items()):
            parsed = self._parse(scope_id, number, relative)
            if parsed is not None:
                docs.append(parsed[0])
        return docs

    def read(self, scope_id: str, number: int) -> tuple[StoredDocument, str] | None:
        """A document and its text."""
        relative = self._paths(scope_id).get(number)
        return self._parse(scope_id, number, relative) if relative else None

    def newest(self, scope_id: str) -> tuple[StoredDocument, str] | None:
        paths = self._paths(scope_id)
        return self.read(scope_id, max(paths)) if paths else None

    def add(
        self,
        scope_id: str,
        *,
        name: str,
        text: str,
        by: str,
        when: datetime,
        pages: int | None,
        size: int,
        mime: str,
        message_id: str | None = None,
    ) -> StoredDocument:
        """Save a document's text as the scope's next numbered file (0700 folder, 0600 file)."""
        with self.files.lock(scope_id):
            self.files.ensure(scope_id)  # scope.json: the folder says whose it is
            number = max(self._paths(scope_id), default=0) + 1
            file = f"{number:03d}-{safe_name(name)}.md"
            doc = StoredDocument(
                number=number,
                name=" ".join(name.split())[:200] or "document",
                source=f"{FILES_DIR}/{file}",
                added=when,
                by=by,
                pages=pages,
                chars=len(text),
                size=size,
                mime=mime,
                message_id=message_id,
            )
            self.files.store.write(self.folder(scope_id) + file, render(doc, text))
        return doc

    def remove(self, scope_id: str, number: int) -> StoredDocument | None:
        """Delete a document's file; the document as it was, or None when there is no such number."""
        with self.files.lock(scope_id):
            relative = self._paths(scope_id).get(number)
            if relative is None:
                return None
            parsed = self._parse(scope_id, number, relative)
            self.files.store.delete(relative)
        return parsed[0] if parsed else None  # None: someone else deleted it meanwhile
