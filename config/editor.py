"""Edits to halo.yaml that keep what a person wrote there.

Comments, key order, quotes and indentation survive (ruamel round-trip). The edited
document is validated before anything is written; the new file replaces the old one
atomically and the previous one is kept as `halo.yaml.bak`. A file lock keeps two halo
processes (or `halo serve` and a CLI command) from interleaving edits.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.representer import RoundTripRepresenter

from config.loader import ConfigError, yaml_mistake

T = TypeVar("T")


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long flow mapping a person wrote on one line
    yaml.Representer = _Representer
    return yaml


class _Representer(RoundTripRepresenter):
    """Round-trip, except that `key: null` stays written out instead of becoming `key:`."""

    def represent_none(self, data: None) -> Any:
        return self.represent_scalar("tag:yaml.org,2002:null", "null")


_Representer.add_representer(type(None), _Representer.represent_none)


# (mapping, sequence, offset) indents people commonly write; the one that reproduces the
# file as it is, is the one used to write it back.
_STYLES = ((2, 4, 2), (2, 2, 0), (4, 4, 2), (4, 6, 4), (4, 4, 0), (4, 2, 0), (2, 3, 1), (3, 3, 1))


def _load(path: Path) -> tuple[CommentedMap, YAML]:
    return _parse(path.read_text(encoding="utf-8") if path.exists() else "", path)


def _parse(text: str, path: Path | str) -> tuple[CommentedMap, YAML]:
    yaml = _yaml()
    try:
        data = yaml.load(text)
    except YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_mistake(exc)} (it was not changed)") from None
    if data is None:
        data = CommentedMap()
    if not isinstance(data, CommentedMap):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    yaml.indent(*_closest_style(data, text))
    return data, yaml


def _closest_style(data: CommentedMap, text: str) -> tuple[int, int, int]:
    original = text.splitlines()

    def differing_lines(style: tuple[int, int, int]) -> int:
        yaml = _yaml()
        yaml.indent(*style)
        buffer = io.StringIO()
        yaml.dump(data, buffer)
        dumped = buffer.getvalue().splitlines()
        return sum(a != b for a, b in zip(original, dumped, strict=False)) + abs(len(original) - len(dumped))

    differing = {}
    for style in _STYLES:  # the first that reproduces the file is the one: most files take one dump
        differing[style] = differing_lines(style)
        if differing[style] == 0:
            return style
    return min(_STYLES, key=differing.__getitem__)


def edit_config(path: Path, change: Callable[[CommentedMap], None], validate: Callable[[Any], T]) -> T:
    """Apply `change` to the document, `validate` the result (raise to refuse), then replace
    the file atomically, keeping the previous one as `<name>.bak`. Returns what `validate` did."""
    with FileLock(str(path.with_name(f".{path.name}.lock"))):
        data, yaml = _load(path)
        change(data)
        result = validate(data)
        buffer = io.StringIO()
        yaml.dump(data, buffer)
        _replace_atomically(path, buffer.getvalue())
        return result


# what each process keeps to itself: how it reaches its database and where it listens (its
# bootstrap). Everything else in halo.yaml is the family's, shared by its processes.
LOCAL_KEYS = ("storage", "admin")


def family_part(text: str, where: Path | str = "halo.yaml") -> str:
    """halo.yaml's text without this process's own keys (`LOCAL_KEYS`): what PostgreSQL keeps
    as the family's config. Comments and layout elsewhere survive."""
    data, yaml = _parse(text, where)
    for key in LOCAL_KEYS:
        data.pop(key, None)
    return _dumped(yaml, data)


def with_local_part(family_text: str, local_text: str, where: Path | str = "halo.yaml") -> str:
    """The family's config with this process's own keys, as its halo.yaml has them, put back."""
    data, yaml = _parse(family_text, "the family's stored halo.yaml")
    local, _ = _parse(local_text, where)
    for key in LOCAL_KEYS:
        if key in local:
            data[key] = local[key]
    return _dumped(yaml, data)


def _dumped(yaml: YAML, data: CommentedMap) -> str:
    if not data:
        return ""
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


def replace_config(path: Path, text: str) -> None:
    """Write halo.yaml whole (a version another process stored), under the editors' lock."""
    with FileLock(str(path.with_name(f".{path.name}.lock"))):
        _replace_atomically(path, text)


def append_member(entry: dict[str, Any]) -> Callable[[CommentedMap], None]:
    """A change that adds one member, written in the style of the members already there."""

    def change(data: CommentedMap) -> None:
        members = data.get("members")
        if members is None:
            members = data["members"] = CommentedSeq()
        item = CommentedMap(entry)
        if members and isinstance(members[-1], CommentedMap) and members[-1].fa.flow_style():
            item.fa.set_flow_style()
        members.append(item)

    return change


def _replace_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    mode = 0o600  # halo.yaml holds tokens: never wider, whatever the file had
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            shutil.copy2(path, path.with_name(f"{path.name}.bak"))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
