"""Reading Cedar files: parse, validate against the schema, and say where a mistake is.

cedarpy reports parse and validation errors without a source position, so the position
is recovered here: policies are numbered in source order (`policy0`, `policy1` …), a
small scanner finds where each statement starts, and a parse error is pinned to the
first line whose prefix of the file fails with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import cedarpy

_EOF = "unexpected end of input"
_MAX_SHOWN = 5


class PolicyError(Exception):
    """A policy or schema file is wrong; the message names the file, the line and what is wrong."""

    def __init__(self, path: Path, line: int | None, message: str, *, more: Iterable[str] = ()) -> None:
        self.path = path
        self.line = line
        self.problem = message
        where = f"{path} line {line}" if line is not None else str(path)
        text = f"{where}: {message}"
        extra = [m for m in more if m != text]
        super().__init__("\n".join([text, *extra]))


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """One loaded policy: what `explain` and the admin page show about it."""

    id: str
    effect: Literal["permit", "forbid"]
    reason: str | None
    path: Path
    line: int


def load_schema(path: Path) -> cedarpy.Schema:
    try:
        return cedarpy.Schema.from_str(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PolicyError(path, None, f"invalid Cedar schema: {exc}") from None


def load_policies(paths: Iterable[Path], schema: cedarpy.Schema) -> tuple[cedarpy.PolicySet, list[PolicyInfo]]:
    """Parse and validate every file, check that @ids are present and unique, build one set."""
    texts: list[str] = []
    infos: list[PolicyInfo] = []
    seen: dict[str, PolicyInfo] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for info in _check_file(path, text, schema):
            if info.id in seen:
                first = seen[info.id]
                raise PolicyError(
                    path,
                    info.line,
                    f'duplicate @id("{info.id}"), already used at {first.path} line {first.line}',
                )
            seen[info.id] = info
            infos.append(info)
        texts.append(text)
    return cedarpy.PolicySet.from_str("\n".join(texts)), infos


def _check_file(path: Path, text: str, schema: cedarpy.Schema) -> list[PolicyInfo]:
    try:
        parsed = cedarpy.PolicySet.from_str(text).to_pst()
    except ValueError as exc:
        raise PolicyError(path, _parse_error_line(text), f"syntax error: {exc}") from None
    starts = _statement_lines(text)
    lines = text.splitlines()

    def where(policy_id: str) -> tuple[int, int]:
        """(first line, last line) of the statement cedar numbered `policy_id`."""
        index = int(policy_id.removeprefix("policy"))
        first = starts[index] if index < len(starts) else 1
        last = starts[index + 1] - 1 if index + 1 < len(starts) else len(lines)
        return first, last

    result = cedarpy.validate_policies(text, schema)
    if not result.validation_passed:
        ids = result.id_annotations_by_policy_id
        messages: list[tuple[int, str]] = []
        for error in result.errors:
            problem = re.sub(r"^for policy `[^`]*`, ", "", error.error)
            first, last = where(error.policy_id) if error.policy_id else (1, len(lines))
            line = _line_naming(lines, first, last, problem)
            named = f' (policy @id("{ids[error.policy_id]}"))' if error.policy_id in ids else ""
            messages.append((line, problem + named))
        unique = list(dict.fromkeys(f"{path} line {n}: {m}" for n, m in messages))
        if len(unique) > _MAX_SHOWN:
            unique[_MAX_SHOWN:] = [f"… and {len(unique) - _MAX_SHOWN} more"]
        line, problem = messages[0]
        raise PolicyError(path, line, problem, more=unique[1:])

    if parsed.templates:
        first_template = min(parsed.templates, key=lambda k: int(k.removeprefix("policy")))
        raise PolicyError(path, where(first_template)[0], "templates (?principal / ?resource) are not supported")
    infos = []
    for policy_id, policy in sorted(parsed.static_policies.items(), key=lambda kv: int(kv[0].removeprefix("policy"))):
        first, _ = where(policy_id)
        annotations = policy.annotations
        if not annotations.get("id"):
            raise PolicyError(path, first, 'policy has no @id("..."); every policy needs a unique @id')
        infos.append(PolicyInfo(annotations["id"], policy.effect, annotations.get("reason"), path, first))
    return infos


def _statement_lines(text: str) -> list[int]:
    """1-based line on which each `;`-terminated statement begins (strings and // comments skipped)."""
    starts: list[int] = []
    line, i, n = 1, 0, len(text)
    in_statement = False
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
            continue
        elif c.isspace():
            pass
        else:
            if not in_statement:
                starts.append(line)
                in_statement = True
            if c == '"':
                i += 1
                while i < n and text[i] != '"':
                    if text[i] == "\\":
                        i += 1
                    elif text[i] == "\n":
                        line += 1
                    i += 1
            elif c == ";":
                in_statement = False
        i += 1
    return starts


def _parse_error_line(text: str) -> int:
    """The first line at which the file stops being a valid (if unfinished) policy set."""
    lines = text.splitlines()
    for k in range(1, len(lines) + 1):
        try:
            cedarpy.PolicySet.from_str("\n".join(lines[:k]))
        except ValueError as exc:
            if str(exc) != _EOF:
                return k
    return max((k for k, text_line in enumerate(lines, 1) if text_line.strip()), default=1)


def _line_naming(lines: list[str], first: int, last: int, problem: str) -> int:
    """The line within a policy that mentions a name the error quotes, else the policy's first line.

    Attribute names are looked for outside string literals (so `@id("no-foo")` does not
    match `foo`), qualified names such as `Halo::Action::"sahre"` as written.
    """
    names = re.findall(r"`([^`]+)`", problem)
    plain = [n for n in names if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    qualified = [n for n in names if "::" in n]
    code = [_code_part(line) for line in lines]
    for name in plain:
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        for number in range(first, last + 1):
            if pattern.search(_STRING.sub('""', code[number - 1])):
                return number
    for name in qualified:
        for number in range(first, last + 1):
            if name in code[number - 1]:
                return number
    return first


_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _code_part(line: str) -> str:
    """The line without a trailing // comment (a // inside a string literal is kept)."""
    for match in re.finditer(r'"(?:[^"\\\n]|\\.)*"|//', line):
        if match.group() == "//":
            return line[: match.start()]
    return line
