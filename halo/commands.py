"""Deterministic commands: answered in code, the same on every platform, no model call.

Adding one is a few lines:

    @commands.command("ping", "Check that I am here")
    async def ping(turn: Turn, args: str) -> str:
        return "pong"
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from config.family import Member
from halo.pairing import APPROVE_USAGE, PairingError, parse_approve
from halo.safety.profiles import effective_profile
from halo.turn import Turn
from policy import SYSTEM

Handler = Callable[[Turn, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str
    handler: Handler
    usage: str = ""


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def command(self, name: str, summary: str, usage: str = "") -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._commands[name] = Command(name, summary, handler, usage)
            return handler

        return register

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._commands.values())

    def match(self, text: str) -> tuple[Command, str] | None:
        """`/name args` or `/name@botname args` → the command and its argument text."""
        if not text.startswith("/"):
            return None
        head, _, args = text[1:].partition(" ")
        name = head.split("@", 1)[0].lower()
        command = self._commands.get(name)
        return (command, args.strip()) if command else None

    async def run(self, turn: Turn, text: str) -> str | None:
        found = self.match(text)
        if found is None:
            return None
        command, args = found
        return await command.handler(turn, args)


commands = CommandRegistry()


@commands.command("help", "What I can do")
async def help_command(turn: Turn, args: str) -> str:
    lines = ["I'm halo. Talk to me in plain words, or use a command:"]
    for cmd in commands:
        usage = f" {cmd.usage}" if cmd.usage else ""
        lines.append(f"/{cmd.name}{usage} — {cmd.summary}")
    return "\n".join(lines)


WHOAMI_ACTIONS = ("converse", "read_memory", "write_memory", "share", "use_tool", "admin")


@commands.command("whoami", "Who I think you are, and what you may do here")
async def whoami_command(turn: Turn, args: str) -> str:
    member = turn.member
    if member is None:
        who = f"You are not in this family's config (id {turn.envelope.speaker.platform_user_id})."
    else:
        extra = f", {member.age_group}" if member.role == "child" else ""
        who = f"You are {member.name} (id {member.id}, {member.role}{extra})."
    lines = [who, f"This chat is {turn.scope.id} ({turn.scope.type})."]
    for action in WHOAMI_ACTIONS:
        decision = turn.services.policy.decide(
            action,  # type: ignore[arg-type]
            principal=member,
            resource=turn.scope,
            from_scope=turn.scope,
            unknown_id=None if member else turn.envelope.speaker.platform_user_id,
            audit=False,
        )
        mark = "yes" if decision.allowed else "no"
        lines.append(f"- {action}: {mark} — {decision.reason}")
    if member is not None:
        lines.extend(_profile_lines(turn, member))
    return "\n".join(lines)


def _profile_lines(turn: Turn, member: Member) -> list[str]:
    """A child's age profile, as the guardrails enforce it."""
    profile = effective_profile(turn.services.policy, member, turn.services.settings.llm)
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


@commands.command("new", "Start a fresh conversation here (the transcript is kept)")
async def new_command(turn: Turn, args: str) -> str:
    await turn.services.sessions.clear(turn.scope.id, why="session cleared: /new")
    turn.services.audit.write("session_cleared", scope_id=turn.scope.id, by=turn.envelope.speaker.label)
    return "Fresh start: I've cleared this chat's working memory. The transcript is kept."


def _refuse_unless_admin(turn: Turn, what: str) -> str | None:
    """Administering halo is for those the policy says may (parents). Asked without a
    from-scope: it is about who the person is, and works from a suspended group too."""
    decision = turn.services.policy.decide(
        "admin",
        principal=turn.member,
        resource=SYSTEM,
        unknown_id=None if turn.member else turn.envelope.speaker.platform_user_id,
    )
    return None if decision.allowed else f"Sorry, only parents can {what}: {decision.reason}"


@commands.command("approve", "Let someone who asked to join talk to me", usage=APPROVE_USAGE)
async def approve_command(turn: Turn, args: str) -> str:
    if refusal := _refuse_unless_admin(turn, "approve join requests"):
        return refusal
    try:
        code, role, name, age_group = parse_approve(args)
        member = await turn.services.pairing.approve(
            code, role=role, name=name, age_group=age_group, by=turn.envelope.speaker.label
        )
    except PairingError as exc:
        return str(exc)
    extra = f", {member.age_group}" if member.role == "child" else ""
    return (
        f"Approved: {member.name} ({member.role}{extra}, id {member.id}) can talk to me now. "
        "I added them to halo.yaml and kept the previous file as halo.yaml.bak."
    )


@commands.command("deny", "Turn down a join request", usage="CODE")
async def deny_command(turn: Turn, args: str) -> str:
    if refusal := _refuse_unless_admin(turn, "deny join requests"):
        return refusal
    if not args.split():
        return "Usage: /deny CODE"
    try:
        request = await turn.services.pairing.deny(args.split()[0], by=turn.envelope.speaker.label)
    except PairingError as exc:
        return str(exc)
    return f"Denied: {request.who} will not hear from me again."


@commands.command("resume", "Start using the parents group again after I stopped")
async def resume_command(turn: Turn, args: str) -> str:
    if refusal := _refuse_unless_admin(turn, "resume the parents group"):
        return refusal
    assert turn.member is not None  # the policy permits admin only to members
    groups = turn.services.groups
    return await groups.resume(turn.member, turn.scope.id if groups.guards(turn.scope) else None)
