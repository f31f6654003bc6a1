"""`/home` and `/mute`: answered in code, no model. Plain async functions of (home, turn, args);
`home_commands` is the one place they become commands."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from halo.commands.builtin import PARENTS_CHATS, Command
from halo.core.times import say_time
from halo.core.turn import Turn

if TYPE_CHECKING:
    from halo.home.events import HomeEvents

MUTE_USAGE = "2h | 30m | 1d | off"
MAX_MUTE = timedelta(days=7)


def _parent_here(turn: Turn) -> bool:
    """A parent, in their own DM or the parents group."""
    member, scope = turn.member, turn.scope
    if member is None or not member.is_parent:
        return False
    return scope.type == "parents_group" or (scope.type == "dm" and scope.owner_id == member.id)


def _describe_state(state_json: str) -> str:
    try:
        state = json.loads(state_json)
    except ValueError:
        return state_json[:80]
    if isinstance(state, dict) and set(state) == {"state"}:
        return str(state["state"])
    if isinstance(state, dict):
        skip = {"linkquality", "voltage", "before"}
        parts = [f"{k}={v}" for k, v in state.items() if k not in skip and not isinstance(v, dict | list)]
        if isinstance(state.get("after"), dict):
            after = state["after"]
            parts = [f"{after.get('label', '?')} ({state.get('type', '?')})"]
        return ", ".join(parts)[:120]
    return str(state)[:80]


async def home_status(home: HomeEvents, turn: Turn, args: str) -> str:
    if not _parent_here(turn):
        return "Sorry, the house's state is shown to parents, in their own chat or the parents group."
    states = await home.watched_states()
    if not states:
        return "No home events seen yet for the entities the home rules watch."
    zone = home.zone()
    lines = ["Home, as last reported:"]
    for s in states:
        when = say_time(datetime.fromtimestamp(s["updated_at"], UTC), zone, datetime.now(UTC))
        lines.append(f"- {s['entity']}: {_describe_state(s['state'])} ({when})")
    return "\n".join(lines)


def parse_duration(text: str) -> timedelta | None:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(m|min|mins|minutes?|h|hrs?|hours?|d|days?)?\s*", text.lower())
    if not match:
        return None
    amount, unit = float(match[1]), (match[2] or "h")[0]
    return (
        timedelta(minutes=amount) if unit == "m" else timedelta(days=amount) if unit == "d" else timedelta(hours=amount)
    )


async def mute(home: HomeEvents, turn: Turn, args: str) -> str:
    member = turn.member
    if member is None:
        return "Sorry, I don't know who you are, so there is nothing to mute."
    now = home.now()
    if args.strip().lower() in ("off", "stop", "0"):
        await home.store.mute(member.id, now.timestamp())
        return "Home messages are back on for you."
    length = parse_duration(args or "2h")
    if length is None or length <= timedelta(0):
        return f"Usage: /mute {MUTE_USAGE}"
    length = min(length, MAX_MUTE)
    until = now + length
    await home.store.mute(member.id, until.timestamp())
    home.audit.write("home_muted", member=member.id, until=until.isoformat())
    local = say_time(until, home.zone(), now)
    return f"Muted non-urgent home messages for you until {local}. Urgent ones (a leak, an alarm) still come."


def home_commands(home: HomeEvents) -> list[Command]:
    """/home and /mute, bound to this halo's home events (the composition root adds them)."""

    async def home_command(turn: Turn, args: str) -> str:
        return await home_status(home, turn, args)

    async def mute_command(turn: Turn, args: str) -> str:
        return await mute(home, turn, args)

    return [
        Command("home", "What the house last reported (parents)", home_command, where=PARENTS_CHATS),
        Command(
            "mute", "Silence non-urgent home messages for a while", mute_command, usage=MUTE_USAGE, where=PARENTS_CHATS
        ),
    ]
