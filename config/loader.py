"""Load halo.yaml into Settings; a bad file becomes one readable ConfigError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from config.paths import HaloPaths, default_home
from config.settings import Settings

HOME_SECTION_FIELD = "home_events"  # where halo.yaml's `home:` section lives in Settings


class ConfigError(Exception):
    """A config problem explained for a person: file, key, what is wrong."""


def _line_of(data: Any, loc: tuple[int | str, ...]) -> int | None:
    """Best-effort 1-based line of a key path in a ruamel round-trip document."""
    node, line = data, None
    for key in loc:
        try:
            lc = node.lc
            if isinstance(key, int) and isinstance(node, list):
                line = lc.item(key)[0] + 1
            elif isinstance(key, str) and key in node:
                line = lc.key(key)[0] + 1
            else:
                break
            node = node[key]
        except (AttributeError, KeyError, IndexError, TypeError):
            break
    return line


def _describe(path: Path, data: Any, err: ValidationError) -> str:
    lines = [f"{path}: invalid configuration"]
    for e in err.errors():
        loc = tuple(e["loc"])
        if loc[:1] == (HOME_SECTION_FIELD,):
            loc = ("home", *loc[1:])
        key = ".".join(str(p) for p in loc) or "(top level)"
        line = _line_of(data, loc)
        where = f" (line {line})" if line else ""
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"  {key}{where}: {msg}")
    return "\n".join(lines)


# what is left open when the parser notices too late, and what probably closes it
_UNCLOSED = {
    "flow mapping": "a `}`",
    "flow sequence": "a `]`",
    "quoted scalar": "a closing quote",
}


def yaml_mistake(exc: YAMLError) -> str:
    """Where a YAML syntax error is, in words. The parser notices an unclosed `{`, `[` or quote
    only where the next key starts (its problem mark), often lines later; the context mark is
    where the unclosed thing began, which is the line to fix, so it is named first."""
    problem = getattr(exc, "problem", None) or str(exc)
    mark, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    if mark is None:
        return f"is not valid YAML: {problem}"
    noticed = f"line {mark.line + 1}, column {mark.column + 1}"
    began = getattr(exc, "context", None) or ""
    if context is None or context.line == mark.line:
        return f"{noticed} is not valid YAML: {problem}"
    what = began.removeprefix("while parsing ").removeprefix("while scanning ").strip() or "what starts there"
    closer = next((hint for kind, hint in _UNCLOSED.items() if kind in what), None)
    hint = f" Is {closer} missing on line {context.line + 1}?" if closer else ""
    return (
        f"line {context.line + 1}, column {context.column + 1} is not valid YAML: {what} starts there "
        f"and is not closed before line {mark.line + 1}, column {mark.column + 1} ({problem}).{hint}"
    )


def read_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return parse_yaml(fh.read(), path)


def parse_yaml(text: str, path: Path) -> Any:
    """halo.yaml's text as data (`path` only names it in an error)."""
    yaml = YAML(typ="rt")
    try:
        data = yaml.load(text)
    except YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_mistake(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return data


def load_settings(home: Path | None = None, **overrides: Any) -> Settings:
    """Read `$HALO_HOME/halo.yaml` (absent → defaults) and apply HALO_* environment overrides."""
    paths = HaloPaths((home or default_home()).expanduser())
    data: Any = {}
    if paths.config_file.exists():
        data = read_yaml(paths.config_file)
    return settings_from(paths, data, **overrides)


def settings_from(paths: HaloPaths, data: Any, **overrides: Any) -> Settings:
    """Validate a parsed halo.yaml (plus HALO_* environment overrides) as `load_settings` does,
    so an edit can be checked before it is written."""
    plain = _plain(data)
    if isinstance(plain.get("home"), dict):  # the `home:` section (rules); HALO_HOME is the path
        plain[HOME_SECTION_FIELD] = plain.pop("home")
    plain.setdefault("home", paths.home)
    plain.update(overrides)
    try:
        settings = Settings(**plain)
    except ValidationError as err:
        raise ConfigError(_describe(paths.config_file, data, err)) from None
    # the environment wins over halo.yaml, but not over the home a caller named: an exported
    # HALO_HOME must not move a config read from another folder (a test's, a backup's) into it
    return settings if settings.home == paths.home else settings.model_copy(update={"home": paths.home})


def _plain(data: Any) -> Any:
    """ruamel's commented containers → plain dicts and lists for pydantic."""
    if isinstance(data, dict):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data
