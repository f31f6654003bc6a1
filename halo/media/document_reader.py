"""Reading a document a member sent, in a fresh child process that a deadline can kill.

A thread cannot be stopped: a 5 KB PDF built to make pypdf parse one shared content stream on
each of 200 pages held a core (and the GIL the event loop needs) for minutes after its reply
said "too long", and shutdown waited on it. So each document gets its own process
(halo/media/read_document.py), with the kernel's CPU and memory limits set inside it, and is
killed when its caller stops waiting: at the deadline, on cancellation, on shutdown. Nothing it
held outlives it. Its environment is a few variables, not halo's: no API key is in reach of the
code that parses untrusted bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import sys

from halo.media.document_text import DocumentKind, DocumentText, Unreadable

log = logging.getLogger(__name__)

CHILD = "halo.media.read_document"
CHILD_ENV = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT")


class TooHeavy(Exception):
    """The document needs more than a reader is given: `what` says which limit, for the person."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Stopped(Exception):
    """halo is stopping: the read was ended before it finished."""


class DocumentReader:
    """One child process per document; `close` kills every one still reading. Start reads from the
    event loop's thread: the child's death-with-parent signal follows the thread that started it."""

    def __init__(self, *, max_pages: int, max_chars: int, cpu_seconds: float, memory_mb: int) -> None:
        self.max_pages = max_pages
        self.max_chars = max_chars
        self.cpu_seconds = max(1, math.ceil(cpu_seconds))  # the kernel's own stop, behind the caller's deadline
        self.memory_mb = memory_mb
        self.running: set[asyncio.subprocess.Process] = set()
        self.closed = False

    async def read(self, data: bytes, kind: DocumentKind) -> DocumentText:
        """The document's text, read in a child process. The caller's deadline (a cancellation)
        kills the child. Raises Unreadable, TooHeavy, or Stopped when halo is stopping."""
        if self.closed:
            raise Stopped
        limits = (self.max_pages, self.max_chars, self.cpu_seconds, self.memory_mb, os.getpid())
        args = [kind, *map(str, limits)]
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            CHILD,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={name: os.environ[name] for name in CHILD_ENV if name in os.environ},
        )
        self.running.add(child)
        try:
            if self.closed:  # `close` came while the child was being started
                raise Stopped
            out, _ = await child.communicate(data)
        finally:
            self.running.discard(child)
            if child.returncode is None:  # the deadline, a cancellation or a stop: it is killed, not waited on
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()  # SIGKILL cannot be ignored: this is the kernel reaping it
        if self.closed:
            raise Stopped
        return self._answer(child.returncode, out)

    def _answer(self, returncode: int | None, out: bytes) -> DocumentText:
        try:
            answer = json.loads(out) if returncode == 0 else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            if returncode is not None and returncode < 0:  # SIGXCPU or SIGKILL: the kernel's limit
                raise TooHeavy(f"it needs more than {self.cpu_seconds} s of work to read")
            log.warning("the document reader failed (exit %s)", returncode)
            raise Unreadable(f"the reader failed (exit {returncode})")
        if "too_big" in answer:
            raise TooHeavy(f"it needs more than {self.memory_mb} MB of memory to read")
        if "unreadable" in answer:
            raise Unreadable(str(answer["unreadable"]))
        return DocumentText(str(answer["text"]), answer["pages"])

    def close(self) -> None:
        """Kill every child still reading (halo is stopping); reads after this raise Stopped."""
        self.closed = True
        for child in list(self.running):
            with contextlib.suppress(ProcessLookupError):
                child.kill()
