"""`halo chat`: a terminal conversation as a member, through the same pipeline (scope cli:<id>)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from halo.port import Inbound, Incoming, Outbound, Sender, clean_text

EXIT_WORDS = {"/quit", "/exit", ":q"}


class TerminalChat:
    """`halo chat`: implements `halo.port.Adapter` for the `cli:<member id>` scope; the reply
    is streamed to `out`."""

    platform = "cli"

    def __init__(self, inbound: Inbound, member: Sender, out: TextIO | None = None) -> None:
        self.inbound = inbound
        self.member = member  # `id` is the member id: `halo chat` signed them in
        self.out = out if out is not None else sys.stdout  # the stdout of now, not of import time
        self.scope_id = f"cli:{member.id}"
        self._streamed = False
        self._answering: str | None = None  # the envelope id whose reply `send` prints in place
        self._reply: str | None = None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def status(self) -> dict[str, object]:
        return {"connected": True, "scope": self.scope_id}

    def awaits_reply(self, envelope_id: str) -> bool:
        return envelope_id == self._answering

    async def send(self, message: Outbound) -> None:
        """The reply to the line just typed (printed unless it was streamed already), or
        something halo starts while the terminal chat is open."""
        if message.scope_id != self.scope_id:
            return
        if message.in_reply_to_envelope is not None and message.in_reply_to_envelope == self._answering:
            self._reply = message.text
            if not self._streamed:
                self.out.write(message.text)
        else:
            self.out.write(f"\nhalo> {message.text}\n")
        self.out.flush()

    async def model_started(self) -> None:
        return None

    async def delta(self, text: str) -> None:
        self._streamed = True
        self.out.write(text)
        self.out.flush()

    async def say(self, text: str) -> str | None:
        """One message in, the reply streamed to `out` (it arrives whole through `send`) and
        returned."""
        member = self.member
        message = Incoming(platform="cli", chat_id=member.id, chat_kind="private", sender=member, text=clean_text(text))
        self.out.write("halo> ")
        self._streamed = False
        self._answering, self._reply = message.id, None
        try:
            await self.inbound.receive(message, self)
        finally:
            self._answering = None
        self.out.write("\n")
        self.out.flush()
        return self._reply

    async def run(self, read_line: Callable[[str], str] = input) -> None:
        name = self.member.name or self.member.id
        self.out.write(f"halo chat as {name} ({self.scope_id}). /help for commands, /quit to leave.\n")
        while True:
            try:
                line = await asyncio.to_thread(read_line, "you> ")
            except (EOFError, KeyboardInterrupt):
                self.out.write("\n")
                return
            text = line.strip()
            if not text:
                continue
            if text.lower() in EXIT_WORDS:
                return
            await self.say(text)
