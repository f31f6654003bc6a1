"""Admission: the policy asked by name whether this speaker may converse here, and a refusal
said the way the place needs. A stranger in a DM gets one pairing reply at most; a DM, the
web chat and the terminal say why not; a group stays silent (the audit log has the decision),
except what the group guard answers there (a parent's /resume in a suspended group)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from halo.core.envelope import Envelope
from halo.core.turn import Turn
from halo.pipeline.reply import Reply
from policy import Decision

if TYPE_CHECKING:
    from halo.commands.builtin import CommandRegistry
    from halo.family.groups import GroupGuard
    from halo.family.pairing import Pairing
    from policy import PolicyEngine


class Admission:
    def __init__(
        self,
        policy: PolicyEngine,
        groups: GroupGuard,
        pairing: Pairing,
        commands: CommandRegistry,
        *,
        tool_budget: int,
    ) -> None:
        self.policy = policy
        self.groups = groups
        self.pairing = pairing
        self.commands = commands  # the group guard matches a parent's /resume with them
        self.tool_budget = tool_budget  # llm.max_tool_calls: what each turn may make

    async def current(self, envelope: Envelope) -> Envelope:
        """The envelope as the group guard sees its chat now (suspended or not)."""
        return await self.groups.current(envelope)

    def turn(self, envelope: Envelope) -> Turn:
        return Turn(envelope, self.policy, tool_budget=self.tool_budget)

    async def admit(self, turn: Turn) -> tuple[Decision, Reply | None]:
        """The policy's `converse` decision, and the refusal to answer with when it says no."""
        decision = turn.decide("converse")
        if decision.allowed:
            return decision, None
        return decision, await self._refusal(turn, decision)

    async def _refusal(self, turn: Turn, decision: Decision) -> Reply:
        env = turn.envelope
        if env.speaker.member is None and env.scope.type == "dm":
            # A stranger: one pairing reply at most, and the message goes nowhere else.
            text = await self.pairing.on_stranger(env.platform, env.speaker)
            return Reply(text, env.scope.id, "denied" if text else "silent", decision)
        if env.scope.type == "dm" or env.platform in ("web", "cli"):
            return Reply(f"Sorry, I can't do that here: {decision.reason}", env.scope.id, "denied", decision)
        if self.groups.guards(env.scope):
            text = await self.groups.on_denied(turn, self.commands)
            if text is not None:
                return Reply(text, env.scope.id, "command", decision)
        return Reply(None, env.scope.id, "silent", decision)  # groups: silence, the audit log has it
