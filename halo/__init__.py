"""halo: a family-first chat-bot gateway. `VERSION` is the installed package's, read once, on
first use (importlib.metadata costs a CLI command that never shows it a noticeable start-up)."""

from functools import cache
from typing import Any


@cache
def _version() -> str:
    from importlib.metadata import version

    return version("halo")


def __getattr__(name: str) -> Any:
    if name == "VERSION":
        return _version()
    raise AttributeError(f"module 'halo' has no attribute {name!r}")
