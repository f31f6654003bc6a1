"""Documents a member sends become things halo can answer from.

A PDF, text, markdown or CSV file that comes with an addressed message is checked
(the policy's `write_memory` for the scope, its type, its size before anything is
downloaded, its pages and length after), read in a child process that the deadline kills
(halo/media/document_reader.py), and saved as text in the scope's `files/`
(memory.documents), where the semantic index finds it. One document per member is read at a
time, and `memory.max_documents_reading` in all; the rest wait their turn and the sender is
told (halo/media/reading_turns.py). The message itself is kept in every case, marked
`(document: <name>)`; when the document was not read the person is told why, in plain words,
and the model is not asked.

Listing and removing documents (/files, the admin API) go through here too, so every
addition and removal is audited and reaches the index.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from config.settings import MemorySettings
from halo.core.envelope import Attachment
from halo.core.turn import Turn
from halo.media.document_reader import DocumentReader, Stopped, TooHeavy
from halo.media.document_text import DocumentKind, DocumentText, Unreadable, kind_of
from halo.media.reading_turns import ReadingTurns
from memory.documents import ScopeDocuments, StoredDocument
from memory.semantic import SemanticMemory
from transcripts import AuditLog

if TYPE_CHECKING:
    from halo.outbound.delivery import Delivery

log = logging.getLogger(__name__)

KEPT = "Your message is kept."
UNSUPPORTED = "I can read PDF, text, markdown and CSV files, but not {name}. " + KEPT
TOO_BIG = "{name} is too big for me ({what}). " + KEPT
SCANNED = (
    "I couldn't find any text in {name}: it looks like a scan (pictures of pages), and I can't read "
    "text out of pictures in a PDF. A PDF with real text, or a photo of the page, would work. " + KEPT
)
EMPTY = "{name} has no text in it. " + KEPT
UNREADABLE = "I couldn't open {name} ({why}). " + KEPT
NOT_FETCHED = "I couldn't fetch {name} just now. Could you send it again? " + KEPT
NOT_HERE = "I can't keep documents in this chat: {reason}. " + KEPT
TOO_SLOW = "I couldn't read {name} in time (I give a document {seconds:g} seconds). " + KEPT
BUSY = "I'm still busy reading other documents, so I couldn't get to {name}. Could you send it again later? " + KEPT
STOPPING = "I was restarting and couldn't finish reading {name}. Could you send it again in a minute? " + KEPT


class NotRead(Exception):
    """The document was not read; the message says why, for the person."""


class Documents:
    """Reads documents that come with messages into their scope's files; lists and removes them."""

    def __init__(
        self,
        store: ScopeDocuments,
        settings: MemorySettings,
        semantic: SemanticMemory,
        audit: AuditLog,
        delivery: Delivery,
    ) -> None:
        self.store = store
        self.max_bytes = settings.max_document_mb * 1_000_000
        self.max_pages = settings.max_document_pages
        self.max_chars = settings.max_document_chars
        self.read_seconds = settings.document_read_seconds
        self.reader = DocumentReader(
            max_pages=self.max_pages,
            max_chars=self.max_chars,
            cpu_seconds=self.read_seconds,
            memory_mb=settings.document_reader_mb,
        )
        self.turns = ReadingTurns(settings.max_documents_reading)
        self.semantic = semantic
        self.audit = audit
        self.delivery = delivery

    def close(self) -> None:
        """Kill every reader still running (halo is stopping): their senders are told to send again."""
        self.reader.close()

    async def receive(self, turn: Turn) -> tuple[Turn, str | None]:
        """The turn with its text saying what came, `(document: trip.pdf) <caption>`, after the
        document was saved; or with why it was not read. A message not addressed to halo is only
        marked: nobody asked halo to keep its document."""
        env = turn.envelope
        attachment = env.attachment
        assert attachment is not None and attachment.kind == "document"
        name = " ".join((attachment.name or "").split()) or "the document"
        said = f"(document: {name})"
        turn = replace(turn, envelope=replace(env, text=f"{said} {env.text}".strip(), attachment=None))
        if not env.addressed:
            return turn, None
        try:
            doc = await self._keep(turn, attachment, name)
        except NotRead as exc:
            return turn, str(exc)
        self.audit.write(
            "document_added",
            scope_id=env.scope.id,
            by=env.speaker.label,
            file=doc.number,
            name=doc.name,
            pages=doc.pages,
            chars=doc.chars,
        )
        self.semantic.request_sync(env.scope.id)  # indexed now, not at the next scheduled sync
        return turn, None

    async def _keep(self, turn: Turn, attachment: Attachment, name: str) -> StoredDocument:
        env = turn.envelope
        decision = turn.decide("write_memory")
        if not decision.allowed:
            raise NotRead(NOT_HERE.format(reason=decision.reason))
        kind = kind_of(attachment.mime, attachment.name)
        if kind is None:
            raise NotRead(UNSUPPORTED.format(name=name))
        if attachment.size is not None and attachment.size > self.max_bytes:
            raise NotRead(TOO_BIG.format(name=name, what=f"{_mb(attachment.size)}; {self._limit}"))
        member = env.speaker.member
        sender = member.id if member else env.speaker.label

        async def told(text: str) -> None:
            await self.delivery.send(env.scope.id, text, kind="notice", reply_to=env.platform_message_id)

        try:  # waiting its turn is bounded too: the scope's other messages wait behind this one
            async with asyncio.timeout(2 * self.read_seconds) as waiting:
                async with self.turns.turn(sender, told):
                    waiting.reschedule(None)
                    data, found = await self._read(attachment, kind, name)
        except TimeoutError:
            raise NotRead(BUSY.format(name=name)) from None
        if found.pages is not None and found.pages > self.max_pages:
            raise NotRead(TOO_BIG.format(name=name, what=f"{found.pages} pages; the limit is {self.max_pages}"))
        if not found.text.strip():
            raise NotRead((SCANNED if kind == "pdf" else EMPTY).format(name=name))
        if len(found.text) > self.max_chars:
            what = f"more than {self.max_chars:,} characters of text; that is the limit"
            raise NotRead(TOO_BIG.format(name=name, what=what))
        await self.store.files.store.ready(env.scope.id)  # PostgreSQL: the scope's rows held here
        return await asyncio.to_thread(
            self.store.add,
            env.scope.id,
            name=attachment.name or "document",
            text=found.text,
            by=member.name if member else env.speaker.label,
            when=env.ts,
            pages=found.pages,
            size=len(data),
            mime=attachment.mime,
            message_id=env.id,
        )

    @property
    def _limit(self) -> str:
        return f"the limit is {self.max_bytes // 1_000_000} MB"

    async def _read(self, attachment: Attachment, kind: DocumentKind, name: str) -> tuple[bytes, DocumentText]:
        """Download and read, both within `read_seconds`: past it, the reader is killed."""
        data: bytes | None = None
        try:
            async with asyncio.timeout(self.read_seconds):
                data = await self._fetch(attachment, name)
                return data, await self.reader.read(data, kind)
        except TimeoutError:
            if data is None:
                raise NotRead(NOT_FETCHED.format(name=name)) from None
            log.warning("reading %s took over %ss; its reader was killed", name, self.read_seconds)
            raise NotRead(TOO_SLOW.format(name=name, seconds=self.read_seconds)) from None
        except TooHeavy as exc:
            raise NotRead(TOO_BIG.format(name=name, what=exc.what)) from None
        except Stopped:
            raise NotRead(STOPPING.format(name=name)) from None
        except Unreadable as exc:
            raise NotRead(UNREADABLE.format(name=name, why=_why(str(exc)))) from None

    async def _fetch(self, attachment: Attachment, name: str) -> bytes:
        try:
            data = await attachment.read()
        except Exception as exc:  # the platform's download failing in its own ways
            log.warning("fetching a document failed: %s: %s", type(exc).__name__, exc)
            raise NotRead(NOT_FETCHED.format(name=name)) from None
        if len(data) > self.max_bytes:
            raise NotRead(TOO_BIG.format(name=name, what=f"{_mb(len(data))}; {self._limit}"))
        return data

    async def acknowledge(self, turn: Turn, on_model_start: object = None) -> str | None:
        """With no model to talk about it: say that the document this message brought was kept
        (a gateway answerer; None for any other message)."""
        await self.store.files.store.ready(turn.scope.id)
        found = await asyncio.to_thread(self.store.newest, turn.scope.id)
        if found is None or found[0].message_id != turn.envelope.id:
            return None
        doc = found[0]
        return f"I kept {doc.name} as file {doc.number} of this chat (/files lists them)."

    async def list(self, scope_id: str) -> list[StoredDocument]:
        await self.store.files.store.ready(scope_id)
        return await asyncio.to_thread(self.store.list, scope_id)

    async def remove(self, scope_id: str, number: int, *, by: str) -> StoredDocument | None:
        """Delete a document and its chunks in the index (synced before this returns, so what
        the caller says next is true). None when the scope has no document of that number."""
        await self.store.files.store.ready(scope_id)
        doc = await asyncio.to_thread(self.store.remove, scope_id, number)
        if doc is None:
            return None
        self.audit.write("document_removed", scope_id=scope_id, by=by, file=doc.number, name=doc.name)
        await self.semantic.sync_scope(scope_id)
        return doc


def _why(detail: str) -> str:
    if "password" in detail or "encrypt" in detail.lower():
        return "it is protected by a password"
    if "binary" in detail:
        return "it is not text after all"
    log.info("an unreadable document: %s", detail)
    return "it seems damaged"


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"
