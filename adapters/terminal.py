"""`halo chat`: a terminal conversation as a member, through the same pipeline (scope cli:<id>)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from config.family import Member
from halo.envelope import Envelope, Speaker
from halo.gateway import Gateway
from halo.port import clean_text
from halo.scopes import resolve_scope

EXIT_WORDS = {"/quit", "/exit", ":q"}


class TerminalChat:
    name = "cli"

    def __init__(self, gateway: Gateway, member: Member, out: TextIO = sys.stdout) -> None:
        self.gateway = gateway
        self.member = member
        self.out = out
        self.scope = resolve_scope(gateway.services.family, f"cli:{member.id}")

    async def say(self, text: str) -> str | None:
        """One message in, the reply streamed to `out` and returned."""
        envelope = Envelope(
            platform="cli",
            scope=self.scope,
            speaker=Speaker(platform_user_id=self.member.id, member=self.member, display_name=self.member.name),
            text=clean_text(text),  # a terminal can paste what UTF-8 cannot encode
        )
        self.out.write("halo> ")
        streamed = False

        async def on_delta(delta: str) -> None:
            nonlocal streamed
            streamed = True
            self.out.write(delta)
            self.out.flush()

        reply = await self.gateway.handle(envelope, on_delta=on_delta)
        if not streamed and reply.text:
            self.out.write(reply.text)
        self.out.write("\n")
        self.out.flush()
        return reply.text

    async def run(self, read_line: Callable[[str], str] = input) -> None:
        self.out.write(f"halo chat as {self.member.name} ({self.scope.id}). /help for commands, /quit to leave.\n")
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
