"""The text of a document: PDF through pypdf, plain text, markdown and CSV as UTF-8.

Pure functions over bytes (no files, no network): `kind_of` says whether halo can read a
document at all from what the platform says (its type and name) before anything is
downloaded; `extract` reads it, page by page for a PDF. Reading bytes a member sent is
CPU and memory a hostile file can make unbounded: it runs only in a child process with OS
limits (halo/media/read_document.py, started by halo/media/document_reader.py).
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pypdf import PdfReader

log = logging.getLogger(__name__)

DocumentKind = Literal["pdf", "text"]

TEXT_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/x-markdown", "text/csv", "text/x-csv", "text/comma-separated-values"}
)
TEXT_EXTENSIONS = frozenset({".txt", ".text", ".md", ".markdown", ".csv"})
GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})


class Unreadable(Exception):
    """The bytes are not a document halo can read (damaged, encrypted, binary after all)."""


@dataclass(frozen=True, slots=True)
class DocumentText:
    text: str
    pages: int | None  # a PDF's page count; None for text


def kind_of(mime: str, name: str | None) -> DocumentKind | None:
    """What reader a document needs, from its type, or its name when the type says nothing."""
    mime = mime.split(";", 1)[0].strip().lower()
    suffix = "." + name.rsplit(".", 1)[-1].lower() if name and "." in name else ""
    if mime == "application/pdf" or (mime in GENERIC_TYPES and suffix == ".pdf"):
        return "pdf"
    if mime in TEXT_TYPES or (mime in GENERIC_TYPES and suffix in TEXT_EXTENSIONS):
        return "text"
    return None


def page_count(data: bytes) -> int:
    """A PDF's pages, read without extracting any text (to refuse a huge one cheaply)."""
    return len(_reader(data).pages)


def extract(data: bytes, kind: DocumentKind, max_pages: int, max_chars: int | None = None) -> DocumentText:
    """The document's text. Reading stops once the text passes `max_chars` (the caller refuses
    it by its length): a PDF that yields too much text costs no more pages than that."""
    if kind == "text":
        return DocumentText(_decode(data), None)
    reader = _reader(data)
    pages = len(reader.pages)
    if pages > max_pages:
        return DocumentText("", pages)  # the caller refuses it by its page count
    parts: list[str] = []
    chars = 0
    for number, page in enumerate(reader.pages, start=1):
        if max_chars is not None and chars > max_chars:
            break
        try:
            text = page.extract_text() or ""
        except MemoryError:  # the reader's limit: the whole document is too big, not this page
            raise
        except Exception as exc:  # one bad page does not lose the others
            log.warning("could not read page %d of a PDF: %s: %s", number, type(exc).__name__, exc)
            text = ""
        text = _tidy(text)
        if text:
            parts.append(f"## Page {number}\n\n{text}" if pages > 1 else text)
            chars += len(parts[-1]) + 2
    return DocumentText("\n\n".join(parts), pages)


def _reader(data: bytes) -> PdfReader:
    from pypdf import PdfReader  # imported when a PDF arrives: a command-only start stays quick
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("the PDF is protected by a password")
        len(reader.pages)  # the page tree is read now, so a damaged one fails here
    except Unreadable:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, OSError) as exc:
        raise Unreadable(f"{type(exc).__name__}: {exc}") from None
    return reader


def _decode(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise Unreadable("binary data, not text")
    return _tidy(data.decode("utf-8-sig", errors="replace"))


def _tidy(text: str) -> str:
    """Trailing spaces and runs of blank lines go; the lines themselves are kept as they were."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()
