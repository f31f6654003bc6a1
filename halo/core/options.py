"""A decision's option: a button's label and the typed command it stands for.

Shared by whoever offers one (pairing, approvals, reminders, home, a command's reply) and by
the record of asks (halo/outbound/asks.py) that a button press is checked against."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Option:
    """`command` None: an acknowledgement (a reminder's "done") that needs no command."""

    label: str
    command: str | None


@dataclass(frozen=True, slots=True)
class WithOptions:
    """A command's reply with the buttons it carries (a task's start · block · done)."""

    text: str
    offered: tuple[Option, ...]
