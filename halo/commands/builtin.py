"""Deterministic commands: answered in code, the same on every platform, no model call.

Adding one is a few lines: write the handler, list it in its module's commands, and the
composition root (halo/runtime/app.py) puts that list into the `CommandRegistry`:

    async def ping(turn: Turn, args: str) -> str:
        return "pong"

    PING = Command("ping", "Check that I am here", ping)

A command that needs one of halo's parts (the memory, the audit log) is built by a function
that takes exactly those parts and returns its `Command`s with handlers closed over them
(`builtin_commands` below, `memory_commands`, `task_commands`): no command reaches for a
part it was not given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.family import Member
from halo.core.envelope import ScopeType
from halo.core.options import WithOptions
from halo.core.turn import Turn
from halo.family.pairing import APPROVE_USAGE, PairingError, parse_approve
from halo.safety.profiles import effective_profile
from policy import SYSTEM

if TYPE_CHECKING:
    from config.settings import LLMSettings
    from halo.family.groups import GroupGuard
    from halo.family.pairing import Pairing
    from transcripts import AuditLog
    from transcripts.session import TranscriptSessions

Handler = Callable[[Turn, str], Awaitable[str | WithOptions]]  # a reply, with its buttons or not


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str
    handler: Handler
    usage: str = ""
    in_menu: bool = True  # False: not offered in a platform's command menu (a name Telegram refuses, `remind!`)
    where: frozenset[ScopeType] | None = None  # the kinds of chat whose menu offers it (None: every kind)

    def offered_in(self, scope_type: ScopeType) -> bool:
        return self.in_menu and (self.where is None or scope_type in self.where)


PARENTS_CHATS: frozenset[ScopeType] = frozenset({"dm", "parents_group"})  # deciding for the family


class CommandRegistry:
    """The commands of this halo, in menu order; built once by the composition root."""

    def __init__(self, commands: Iterable[Command]) -> None:
        self._commands: dict[str, Command] = {}
        for command in commands:
            if command.name in self._commands:
                raise ValueError(f"two commands are named /{command.name}")
            self._commands[command.name] = command

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def match(self, text: str) -> tuple[Command, str] | None:
        """`/name args` or `/name@botname args` → the command and its argument text."""
        if not text.startswith("/"):
            return None
        head, _, args = text[1:].partition(" ")
        name = head.split("@", 1)[0].lower()
        command = self._commands.get(name)
        return (command, args.strip()) if command else None

    async def run(self, turn: Turn, text: str) -> str | WithOptions | None:
        found = self.match(text)
        if found is None:
            return None
        command, args = found
        return await command.handler(turn, args)


def help_text(commands: Iterable[Command]) -> str:
    lines = ["I'm halo. Talk to me in plain words, or use a command:"]
    for cmd in commands:
        usage = f" {cmd.usage}" if cmd.usage else ""
        lines.append(f"/{cmd.name}{usage} — {cmd.summary}")
    return "\n".join(lines)


WHOAMI_ACTIONS = ("converse", "read_memory", "write_memory", "share", "use_tool", "admin")


async def whoami(
    turn: Turn,
    llm: LLMSettings,
    tools: Callable[[Turn], Iterable[str]] | None = None,
    more: Iterable[Callable[[Turn], str]] = (),
) -> str:
    member = turn.member
    if member is not None and member.age_group == "young_child":
        return _young_whoami(turn, member, llm)
    if member is None:
        who = f"You are not in this family's config (id {turn.envelope.speaker.platform_user_id})."
    else:
        extra = f", {member.age_group}" if member.role == "child" else ""
        who = f"You are {member.name} (id {member.id}, {member.role}{extra})."
    lines = [who, f"This chat is {turn.scope.id} ({turn.scope.type})."]
    for action in WHOAMI_ACTIONS:
        decision = turn.decide(action, audit=False)
        mark = "yes" if decision.allowed else "no"
        lines.append(f"- {action}: {mark} — {decision.reason}")
    lines.extend(line(turn) for line in more)  # decisions about people, not this scope (reminders)
    if tools is not None:  # the same answer the model's tool list is built from
        names = sorted(tools(turn))
        lines.append(f"Tools I may use for you here: {', '.join(names) if names else 'none'}.")
    if member is not None:
        lines.extend(_profile_lines(turn, member, llm))
    return "\n".join(lines)


def _young_whoami(turn: Turn, member: Member, llm: LLMSettings) -> str:
    """/whoami for a young child: the same decisions, said in words a child reads (no policy terms)."""
    profile = effective_profile(turn.policy, member, llm)
    names = [p.name for p in turn.family.members if p.id in profile["parents_who_may_read_transcript"]]
    lines = [f"Hi {member.name}! I'm halo, your family's helper."]
    talk = turn.decide("converse", audit=False).allowed
    lines.append("You can talk to me here." if talk else "I can't talk with you in this chat.")
    if talk and turn.decide("write_memory", audit=False).allowed:
        lines.append('I can remember things for you: say "remember that …".')
    lines.append("I keep my answers short, and I stay away from some grown-up topics.")
    lines.append("If something you tell me worries me, I tell your parents, to keep you safe.")
    if names:
        lines.append(f"{' and '.join(names)} can read what we say to each other.")
    return "\n".join(lines)


def _profile_lines(turn: Turn, member: Member, llm: LLMSettings) -> list[str]:
    """A child's age profile, as the guardrails enforce it."""
    profile = effective_profile(turn.policy, member, llm)
    if not profile["guarded"]:
        return []
    readers = ", ".join(profile["parents_who_may_read_transcript"]) or "none"
    return [
        f"Your safety profile ({profile['age_group']}):",
        f"- model: {profile['model'] or 'none configured'}",
        f"- tools: {', '.join(profile['tool_classes']) or 'none'}",
        f"- replies up to {profile['max_reply_chars']} characters",
        f"- topics I steer away from: {', '.join(profile['blocked_topics']) or 'none'}",
        "- if you might be in danger, I tell your parents (always for serious worries"
        + (", and for smaller ones too)" if profile["notify_parents_on_medium"] else ")"),
        f"- parents who may read your chats with me: {readers}",
    ]


def refuse_unless_admin(turn: Turn, what: str) -> str | None:
    """Administering halo is for those the policy says may (parents). Asked without a
    from-scope: it is about who the person is, and works from a suspended group too."""
    decision = turn.decide("admin", SYSTEM, from_here=False)
    return None if decision.allowed else f"Sorry, only parents can {what}: {decision.reason}"


def builtin_commands(
    *,
    registry: Callable[[], Iterable[Command]],
    llm: LLMSettings,
    sessions: TranscriptSessions,
    audit: AuditLog,
    pairing: Pairing,
    groups: GroupGuard,
    tools: Callable[[Turn], Iterable[str]] | None = None,
    whoami_lines: Iterable[Callable[[Turn], str]] = (),
) -> list[Command]:
    """The built-in commands, bound to what each needs; `registry` lists every command for /help."""

    async def help_command(turn: Turn, args: str) -> str:
        return help_text(registry())

    async def whoami_command(turn: Turn, args: str) -> str:
        return await whoami(turn, llm, tools, whoami_lines)

    async def new_command(turn: Turn, args: str) -> str:
        await sessions.clear(turn.scope.id, why="session cleared: /new")
        audit.write("session_cleared", scope_id=turn.scope.id, by=turn.envelope.speaker.label)
        return "Fresh start: I've cleared this chat's working memory. The transcript is kept."

    async def approve_command(turn: Turn, args: str) -> str:
        if refusal := refuse_unless_admin(turn, "approve join requests"):
            return refusal
        try:
            code, role, name, age_group = parse_approve(args)
            member = await pairing.approve(
                code, role=role, name=name, age_group=age_group, by=turn.envelope.speaker.label
            )
        except PairingError as exc:
            return str(exc)
        extra = f", {member.age_group}" if member.role == "child" else ""
        return (
            f"Approved: {member.name} ({member.role}{extra}, id {member.id}) can talk to me now. "
            "I added them to halo.yaml and kept the previous file as halo.yaml.bak."
        )

    async def deny_command(turn: Turn, args: str) -> str:
        if refusal := refuse_unless_admin(turn, "deny join requests"):
            return refusal
        if not args.split():
            return "Usage: /deny CODE"
        try:
            request = await pairing.deny(args.split()[0], by=turn.envelope.speaker.label)
        except PairingError as exc:
            return str(exc)
        return f"Denied: {request.who} will not hear from me again."

    async def resume_command(turn: Turn, args: str) -> str:
        if refusal := refuse_unless_admin(turn, "resume the parents group"):
            return refusal
        assert turn.member is not None  # the policy permits admin only to members
        return await groups.resume(turn.member, turn.scope.id if groups.guards(turn.scope) else None)

    return [
        Command("help", "What I can do", help_command),
        Command("whoami", "Who I think you are, and what you may do here", whoami_command),
        Command("new", "Start a fresh conversation here (the transcript is kept)", new_command),
        Command(
            "approve",
            "Let someone who asked to join talk to me",
            approve_command,
            usage=APPROVE_USAGE,
            where=PARENTS_CHATS,
        ),
        Command("deny", "Turn down a join request", deny_command, usage="CODE", where=PARENTS_CHATS),
        Command("resume", "Start using the parents group again after I stopped", resume_command, where=PARENTS_CHATS),
    ]
