"""Real documents for tests: a minimal valid PDF whose pages carry text streams (what a school
letter exported from a word processor is, stripped to the bone), and one with no text at all
(what a scanner makes, minus the pictures). And hostile ones: a few kilobytes that cost a reader
minutes of CPU and hundreds of MB (`hostile_pdf`), for tests of what such a file must not do."""

from __future__ import annotations

import os
import zlib
from pathlib import Path


def pdf(pages: list[list[str]]) -> bytes:
    """A PDF 1.4 file: one page per item of `pages`, each line of text drawn in Helvetica."""
    count = len(pages)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{4 + 2 * i} 0 R' for i in range(count))}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, lines in enumerate(pages):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        drawn = "".join(f"({_escape(line)}) Tj T*\n" for line in lines)
        stream = f"BT\n/F1 12 Tf\n72 720 Td\n14 TL\n{drawn}ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    return _assemble(objects)


def hostile_pdf(pages: int = 200, stream_mb: float = 2, *, compress: bool = False) -> bytes:
    """A PDF whose `pages` pages all draw one shared content stream of `stream_mb` MB of text
    operators: every page makes a reader parse the whole stream again. Compressed
    (FlateDecode), a 10 MB stream is a file of a few kilobytes."""
    line = b"() Tj 1 0 Td\n"  # draws nothing: no text to stop at, only operators to parse
    body = b"BT\n/F1 12 Tf\n72 720 Td\n" + line * int(stream_mb * 1_000_000 / len(line)) + b"ET"
    head = b"<< /Length %d >>"
    if compress:
        body = zlib.compress(body, 9)
        head = b"<< /Length %d /Filter /FlateDecode >>"
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        head % len(body) + b"\nstream\n" + body + b"\nendstream",
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
    page += b"/Contents 4 0 R >>"
    objects += [page] * pages
    return _assemble(objects)


def _assemble(objects: list[bytes]) -> bytes:
    """Numbered objects (the first is the catalog), an xref table and a trailer: a PDF file."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


SCHOOL_LETTER = pdf(
    [
        [
            "Greenfield Primary School",
            "Dear parents,",
            "The Year 4 school trip to the Science Museum is on Friday 14 March.",
            "The coach leaves at 8:45 from the school gate.",
        ],
        ["Please bring a packed lunch and a waterproof coat.", "Mrs Okafor, Year 4 teacher"],
    ]
)
SCANNED = pdf([[], []])  # pages, and not a word of text on them


def children_of(pid: int) -> list[int]:
    """The processes `pid` started that are still alive (Linux /proc): a document reader shows here."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # the task ended while we looked
            continue
    return found


def alive(pid: int) -> bool:
    """True while `pid` runs or waits unreaped (a zombie counts: it was not cleaned up)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
