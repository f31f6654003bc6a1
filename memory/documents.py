"""A scope's documents: what members sent, kept as text in `memory/scopes/<hash>/files/`.

Each document is one markdown file, `NNN-<name>.md`: a short header (the name it was sent
with, who sent it, when, its pages) and the text read from it. The number in the file name
is the document's number in `/files`; it does not change while the file exists, so
"/files rm 2" always means the file that was listed as 2. The file is the only record:
deleting it (by hand, with `/files rm`, from the admin API) is deleting the document, and
the semantic index drops its chunks at the next sync. The original bytes are not kept:
halo answers from the text, and the chat the document came through still has the original.

Writes happen under the scope's lock (memory.files), in worker threads: these methods block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory.files import atomic_write
from memory.scope_files import ScopeFiles

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


def parse(path: Path, number: int, source: str) -> tuple[StoredDocument, str] | None:
    """The header and the text of a document file (None when it is gone). A file without
    halo's header (copied there by hand) is all text, named by its file name."""
    try:
        content = path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None
    head, sep, body = content.partition(f"\n{HEADER_END}\n")
    lines = head.splitlines()
    if not sep or not lines or not lines[0].startswith("# "):  # put there by hand: all of it is text
        match = _FILE.match(path.name)
        lines, body = [f"# {match.group(2) if match else path.stem}"], content
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if match := _FIELD.match(line):
            fields[match.group(1)] = match.group(2).strip()
    try:
        added = datetime.fromisoformat(fields.get("received", ""))
    except ValueError:
        added = datetime.fromtimestamp(path.stat().st_mtime, UTC)
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

    def folder(self, scope_id: str) -> Path:
        return self.files.paths.scope_dir(scope_id) / FILES_DIR

    def _paths(self, scope_id: str) -> dict[int, Path]:
        folder = self.folder(scope_id)
        found: dict[int, Path] = {}
        if folder.is_dir():
            for path in folder.iterdir():
                if (match := _FILE.match(path.name)) and path.is_file():
                    found[int(match.group(1))] = path
        return found

    def list(self, scope_id: str) -> list[StoredDocument]:
        """Every document of the scope, by number."""
        docs = []
        for number, path in sorted(self._paths(scope_id).items()):
            parsed = parse(path, number, f"{FILES_DIR}/{path.name}")
            if parsed is not None:
                docs.append(parsed[0])
        return docs

    def read(self, scope_id: str, number: int) -> tuple[StoredDocument, str] | None:
        """A document and its text."""
        path = self._paths(scope_id).get(number)
        return parse(path, number, f"{FILES_DIR}/{path.name}") if path else None

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
            folder = self.folder(scope_id)
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
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
            atomic_write(folder / file, render(doc, text), record=self.files.record)
        return doc

    def remove(self, scope_id: str, number: int) -> StoredDocument | None:
        """Delete a document's file; the document as it was, or None when there is no such number."""
        with self.files.lock(scope_id):
            path = self._paths(scope_id).get(number)
            if path is None:
                return None
            parsed = parse(path, number, f"{FILES_DIR}/{path.name}")
            path.unlink(missing_ok=True)
            if self.files.record is not None:
                self.files.record.changed(path)
        return parsed[0] if parsed else None  # None: someone else deleted it meanwhile
