"""The child process that reads one document: `python -m halo.media.read_document KIND MAX_PAGES
MAX_CHARS CPU_SECONDS MEMORY_MB PARENT_PID`, the document's bytes on stdin, one JSON object on
stdout.

It sets its own OS limits (CPU seconds and address space) before it reads a byte, so a hostile
file that gets past the parent's deadline is still stopped by the kernel; on Linux it also dies
with halo (a SIGKILLed halo cannot kill its readers itself). It imports only
what reading needs (pypdf, for a PDF): no SDK, no settings, a quick start. The answer is
`{"text": ..., "pages": ...}`, or `{"unreadable": why}`, or `{"too_big": "memory"}`.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import resource
import signal
import sys
from typing import Any, cast

from halo.media.document_text import DocumentKind, Unreadable, extract


def limit(cpu_seconds: int, memory_mb: int) -> None:
    """The kernel ends this process after `cpu_seconds` of CPU (SIGXCPU, then SIGKILL a second
    later) and refuses it memory past `memory_mb` (MemoryError); no core file either way."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    size = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size, size))


def die_with(parent: int) -> None:
    """SIGKILL this process when the parent exits (Linux's PR_SET_PDEATHSIG); already gone: exit now."""
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        sys.exit(1)


def read(data: bytes, kind: DocumentKind, max_pages: int, max_chars: int) -> dict[str, Any]:
    try:
        found = extract(data, kind, max_pages, max_chars)
    except Unreadable as exc:
        return {"unreadable": str(exc)}
    except MemoryError:
        return {"too_big": "memory"}
    except Exception as exc:  # a file from anywhere can break a reader in any way
        return {"unreadable": f"{type(exc).__name__}: {exc}"}
    return {"text": found.text, "pages": found.pages}


def main(argv: list[str]) -> int:
    kind, max_pages, max_chars, cpu_seconds, memory_mb, parent = argv
    die_with(int(parent))
    limit(int(cpu_seconds), int(memory_mb))
    logging.disable(logging.WARNING)  # pypdf warns about every oddity of a damaged file; nobody reads it
    data = sys.stdin.buffer.read()
    answer = read(data, cast(DocumentKind, kind), int(max_pages), int(max_chars))
    del data
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
