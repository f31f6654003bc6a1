"""/files and /files rm N: the documents kept in this chat, answered in code.

Listing asks the policy for `read_memory`, removing for `write_memory`, both on this scope:
a document is part of the scope's memory.
"""

from __future__ import annotations

from halo.commands.builtin import Command
from halo.core.turn import Turn
from halo.media.documents import Documents
from memory.documents import StoredDocument

USAGE = "Usage: /files to list this chat's documents, /files rm N to remove one"


def describe(doc: StoredDocument) -> str:
    """`1. trip.pdf — 2 pages, 14 kB, from Mom, 24 Nov 2026`"""
    size = f"{doc.pages} page{'s' if doc.pages != 1 else ''}, " if doc.pages else ""
    kb = max(1, round(doc.size / 1000))
    day = doc.added.astimezone()
    return f"{doc.number}. {doc.name} — {size}{kb} kB, from {doc.by}, {day.day} {day:%b %Y}"


def files_commands(documents: Documents) -> list[Command]:
    async def files(turn: Turn, args: str) -> str:
        words = args.split()
        if not words:
            return await show(turn)
        if words[0].lower() in ("rm", "remove", "delete") and len(words) == 2 and words[1].isdigit():
            return await remove(turn, int(words[1]))
        return USAGE

    async def show(turn: Turn) -> str:
        decision = turn.decide("read_memory")
        if not decision.allowed:
            return f"I can't show files here: {decision.reason}"
        docs = await documents.list(turn.scope.id)
        if not docs:
            return "No documents in this chat yet. Send me a PDF, text or markdown file and I'll keep it here."
        lines = ["Documents in this chat:", *(describe(doc) for doc in docs), "Remove one: /files rm N"]
        return "\n".join(lines)

    async def remove(turn: Turn, number: int) -> str:
        decision = turn.decide("write_memory")
        if not decision.allowed:
            return f"I can't change files here: {decision.reason}"
        doc = await documents.remove(turn.scope.id, number, by=turn.envelope.speaker.label)
        if doc is None:
            return f"There is no file {number} in this chat (/files lists them)."
        return f"Removed file {number}, {doc.name}: it is gone from this chat's files and from what I look up."

    return [Command("files", "List the documents kept in this chat, or remove one", files, usage="[rm N]")]
