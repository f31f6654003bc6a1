"""MEMORY.md as a list of fact lines a person can read and fix.

A fact is one `- ` line with its origin in italics at the end:

    - Mom's shoe size: 38 _(Mom, 2026-02-13)_
    - ~~Mom's shoe size: 37~~ _(Mom, 2026-02-10; superseded 2026-02-13)_
    - The spare key is under the blue pot _(Wags, 2026-02-11)_

Keyed facts ("<name>'s <key>: <value>") are recognised again when the file is read, so a
newer value strikes the older line through instead of deleting it. Every function here is
text in, text out: they are applied to the file as it is at the moment of writing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from memory.markdown import append_to_section, tidy
from memory.rules import content_tokens, normalise_key, tokens

FACTS = "Facts"
SHARED = "Shared"
LEARNED = "Learned"

_LINE = re.compile(r"^\s*[-*]\s+(?P<body>.+?)(?:\s+_\((?P<meta>[^()]*)\)_)?\s*$")
_KEYED = re.compile(r"^(?P<subject>[^:~]+?)['’]s (?P<key>[^:]{1,60}): (?P<value>.+)$")
_STRUCK = re.compile(r"^~~(?P<body>.+)~~$")


@dataclass(frozen=True, slots=True)
class FactLine:
    index: int  # line number in the file's text (0-based)
    body: str  # the fact without its markup
    meta: str
    struck: bool
    subject: str | None = None
    key: str | None = None
    value: str | None = None

    def mentions(self, name: str) -> bool:
        """Said by or about `name` (case-insensitive)."""
        wanted = name.casefold()
        return (self.subject or "").casefold() == wanted or wanted in self.meta.casefold()


def memory_header(scope_id: str, described: str) -> str:
    return (
        "# Memory\n\n"
        f"<!-- What halo remembers in {described} ({scope_id}). halo adds lines here; you may edit or\n"
        "delete any of them, halo re-reads the file before each change. A struck-through line was\n"
        "replaced by a newer one. -->\n"
    )


def parse(text: str) -> list[FactLine]:
    found: list[FactLine] = []
    in_comment = False
    for i, line in enumerate(text.split("\n")):
        if "<!--" in line and "-->" not in line:
            in_comment = True
        if in_comment:
            in_comment = "-->" not in line
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        body, meta = m.group("body").strip(), (m.group("meta") or "").strip()
        struck_m = _STRUCK.match(body)
        struck = struck_m is not None
        if struck_m:
            body = struck_m.group("body").strip()
        keyed = _KEYED.match(body)
        if keyed:
            found.append(
                FactLine(
                    i,
                    body,
                    meta,
                    struck,
                    keyed.group("subject").strip(),
                    normalise_key(keyed.group("key")),
                    keyed.group("value").strip(),
                )
            )
        else:
            found.append(FactLine(i, body, meta, struck))
    return found


def live(text: str) -> list[FactLine]:
    return [f for f in parse(text) if not f.struck]


def render_keyed(subject: str, key: str, value: str) -> str:
    return f"{subject}'s {key}: {value}"


def fact_line(body: str, meta: str) -> str:
    return f"- {body} _({meta})_" if meta else f"- {body}"


def _same(a: str, b: str) -> bool:
    return tokens(a) == tokens(b)


@dataclass(frozen=True, slots=True)
class Added:
    added: bool
    superseded: int = 0


def add_fact(
    text: str,
    body: str,
    meta: str,
    *,
    section: str = FACTS,
    header: str = "",
    subject: str | None = None,
    key: str | None = None,
    value: str | None = None,
    day: date | None = None,
) -> tuple[str, Added]:
    """Add one fact unless an equal live one exists; a keyed fact strikes older values of its key."""
    facts = live(text)
    if key is not None and subject is not None:
        same_key = [f for f in facts if f.key == key and (f.subject or "").casefold() == subject.casefold()]
        if any(_same(f.value or "", value or "") for f in same_key):
            return text, Added(False)
        lines = text.split("\n")
        stamp = f"superseded {day.isoformat()}" if day else "superseded"
        for f in same_key:
            meta_old = f"{f.meta}; {stamp}" if f.meta else stamp
            lines[f.index] = fact_line(f"~~{f.body}~~", meta_old)
        text = "\n".join(lines)
        superseded = len(same_key)
    else:
        if any(_same(f.body, body) for f in facts):
            return text, Added(False)
        superseded = 0
    return append_to_section(text, section, [fact_line(body, meta)], header), Added(True, superseded)


def forget(text: str, query: str, only_of: str | None = None) -> tuple[str, int]:
    """Remove every fact (current or struck) whose words include all of the query's words.

    `only_of` limits it to facts said by or about that person ("forget my …" in a group).
    """
    wanted = content_tokens(query)
    if not wanted:
        return text, 0
    doomed = {
        f.index for f in parse(text) if wanted <= content_tokens(f.body) and (only_of is None or f.mentions(only_of))
    }
    if not doomed:
        return text, 0
    lines = [line for i, line in enumerate(text.split("\n")) if i not in doomed]
    return "\n".join(lines), len(doomed)


def prompt_view(text: str) -> str:
    """MEMORY.md for the model: current facts under their headings, no struck lines, no comments."""
    struck = {f.index for f in parse(text) if f.struck}
    kept = [line for i, line in enumerate(text.split("\n")) if i not in struck]
    view = tidy("\n".join(kept))
    return "" if not live(view) else view
