"""Daily files: `daily/YYYY-MM-DD.md`, the temporal side of a scope's memory.

Two sections: `## Notes`, written by distillation (what was said that is not a durable
fact, one `[HH:MM] speaker: text` line each), and `## Transcript`, a lightweight
`[user]` / `[halo]` log appended after every turn so a parent can skim a day.
"""

from __future__ import annotations

import re
from datetime import date

from memory.markdown import append_to_section, last_heading, section_body, tidy
from memory.rules import content_tokens

NOTES = "Notes"
TRANSCRIPT = "Transcript"
REPLY_CHARS = 160
LOG_CHARS = 500


def daily_header(day: date, scope_id: str) -> str:
    return (
        f"# {day.isoformat()} ({day:%A})\n\n"
        f"<!-- What happened in {scope_id} on {day.isoformat()}. You may edit or delete lines. -->\n\n"
        f"## {NOTES}\n\n## {TRANSCRIPT}\n"
    )


def one_line(text: str, limit: int) -> str:
    """Whitespace folded to single spaces, cut at a word boundary with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip(",;:") + "…"


_SENTENCE_END = re.compile(r"(?<=[^\s\d][.!?])\s")  # not after a digit: "1." and "3.5" do not end one


def shorten_reply(text: str) -> str:
    """The first sentence of an assistant reply, within REPLY_CHARS."""
    text = " ".join(text.split())
    m = _SENTENCE_END.search(text)
    if m is not None and m.start() <= REPLY_CHARS:
        return text[: m.start()]
    return one_line(text, REPLY_CHARS)


def note_line(hhmm: str, speaker: str, text: str) -> str:
    return f"- [{hhmm}] {speaker}: {text}"


def log_line(hhmm: str, role: str, text: str) -> str:
    return f"- [{hhmm}] [{role}] {text}"


def ends_in_section(text: str, section: str) -> bool:
    """Is `## section` the file's last heading (so appending at the end lands in it)?"""
    return (last_heading(text) or "").casefold() == section.casefold()


def add_lines(text: str, section: str, lines: list[str], header: str) -> str:
    """Append lines to a section, skipping any the section already holds (a rerun adds nothing)."""
    existing = set((section_body(text, section) or "").split("\n"))
    fresh = [line for line in lines if line not in existing]
    return append_to_section(text, section, fresh, header)


def prompt_view(text: str, section: str) -> str:
    """One section for the model; a hand-made file without sections is shown whole."""
    body = section_body(text, section)
    if body is None:
        has_sections = section_body(text, NOTES) is not None or section_body(text, TRANSCRIPT) is not None
        return "" if has_sections else tidy(text)
    return tidy(body)


def matches(line: str, query: str, only_of: str | None = None) -> bool:
    """Does a note or log line hold every word of a forget query (and name `only_of`, if given)?"""
    wanted = content_tokens(query)
    if not wanted or not line.lstrip().startswith(("-", "*")):
        return False
    if only_of is not None and only_of.casefold() not in line.casefold():
        return False
    return wanted <= content_tokens(line)


def forget(text: str, query: str, only_of: str | None = None) -> tuple[str, int]:
    """Remove the note and log lines matching a forget query."""
    lines = text.split("\n")
    kept = [line for line in lines if not matches(line, query, only_of)]
    return "\n".join(kept), len(lines) - len(kept)
