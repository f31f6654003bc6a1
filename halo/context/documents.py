"""The document just sent: its beginning, in the context of the turn it came with and the next
few minutes, so "what does this say?" is answered from the document itself. Older documents
are found through recall (their text is in the scope's semantic index).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from halo.context.builder import ContextSection
from halo.core.turn import Turn
from halo.routing.plan import TurnPlan
from memory.documents import ScopeDocuments, StoredDocument

RECENT = timedelta(minutes=15)  # a follow-up question about a document comes within minutes
PRIORITY = 2  # right after who is speaking: it is what this turn is about
CUT = "[… the rest is in the file: search it with the recall tool …]"


class DocumentSource:
    """This scope's newest document, when this message brought it or it came moments ago."""

    def __init__(self, store: ScopeDocuments, excerpt_tokens: int) -> None:
        self.store = store
        self.excerpt_chars = excerpt_tokens * 4  # the estimate the context budget uses

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]:
        env = turn.envelope
        if not turn.decide("read_memory", audit=False).allowed:
            return []
        if not self.store.any(turn.scope.id):  # most scopes: no document (a stat, or a look at what is held)
            return []
        found = await asyncio.to_thread(self.store.newest, turn.scope.id)
        if found is None:
            return []
        doc, text = found
        if doc.message_id != env.id and not timedelta(0) <= env.ts - doc.added <= RECENT:
            return []
        return [ContextSection("A document sent in this chat", self.describe(doc, text), PRIORITY)]

    def describe(self, doc: StoredDocument, text: str) -> str:
        pages = f", {doc.pages} page{'s' if doc.pages != 1 else ''}" if doc.pages else ""
        intro = (
            f"{doc.by} sent “{doc.name}”{pages} at {doc.added.astimezone():%H:%M}. It is saved as file "
            f"{doc.number} of this chat (/files lists the files; /files rm {doc.number} removes it), and "
            "you can search all of it with the recall tool. Cite it by its name. Its text begins:"
        )
        return f"{intro}\n\n{excerpt(text, self.excerpt_chars)}"


def excerpt(text: str, max_chars: int) -> str:
    """The beginning of `text`, cut at a line end when one is near, with a marker when cut."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    newline = head.rfind("\n")
    if newline > max_chars * 3 // 4:
        head = head[:newline]
    return f"{head.rstrip()}\n{CUT}"
