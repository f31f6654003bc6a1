"""The little markdown halo's memory files need: `## sections` of `- ` lines, edited as text.

Everything works on the file's text as a person left it: unknown sections, blank lines
and comments are kept where they are; new lines go to the end of their section.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_HEADING = re.compile(r"^##\s+(.+?)\s*$")


def strip_comments(text: str) -> str:
    return _COMMENT.sub("", text)


def _section_bounds(lines: list[str], heading: str) -> tuple[int, int] | None:
    """(index of the heading line, index one past the section's last line)."""
    start = None
    wanted = heading.casefold()
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if m is None:
            continue
        if start is not None:
            return start, i
        if m.group(1).casefold() == wanted:
            start = i
    return (start, len(lines)) if start is not None else None


def append_to_section(text: str, heading: str, new_lines: list[str], header: str = "") -> str:
    """`text` with `new_lines` at the end of `## heading` (created at the end if missing).

    `header` starts a file that is empty so far.
    """
    if not new_lines:
        return text
    if not text.strip():
        text = header
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    bounds = _section_bounds(lines, heading)
    if bounds is None:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", f"## {heading}", "", *new_lines]
        return "\n".join(lines) + "\n"
    start, end = bounds
    insert = end
    while insert > start + 1 and not lines[insert - 1].strip():
        insert -= 1
    block = new_lines if insert > start + 1 else ["", *new_lines]
    tail = lines[insert:]
    if tail and tail[0].strip():
        block = [*block, ""]  # keep a blank line before the next heading
    lines[insert:insert] = block
    return "\n".join(lines) + "\n"


def section_body(text: str, heading: str) -> str | None:
    """The lines under `## heading` (without the heading), or None when there is no such section."""
    lines = text.split("\n")
    bounds = _section_bounds(lines, heading)
    if bounds is None:
        return None
    start, end = bounds
    return "\n".join(lines[start + 1 : end]).strip()


def last_heading(text: str) -> str | None:
    """The title of the last `## ` heading, or None."""
    found = None
    for line in text.split("\n"):
        if (m := _HEADING.match(line)) is not None:
            found = m.group(1)
    return found


def tidy(text: str) -> str:
    """No comments, no runs of blank lines: what a model needs to read, and nothing more."""
    text = strip_comments(text)
    text = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", text)
    return text.strip()
