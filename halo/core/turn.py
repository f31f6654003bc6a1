"""The run context of one turn: what every command and tool is handed.

A turn is the message and the one way to ask the policy about it (`decide`); nothing else.
What a command or a tool needs besides (memory, the index, the audit log) it was given when
the composition root built it. Tools receive the turn through the Agents SDK's
`RunContextWrapper[TurnRun]` (`ctx.context.turn`) and ask the policy themselves; nothing in a
tool trusts the model to have respected a permission.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from config.family import Family, Member
from halo.core.envelope import Envelope, Scope

if TYPE_CHECKING:
    from policy import Decision, PolicyEngine


class Screened(Protocol):
    """A guarded turn's verdict on its message (halo/safety's `SafetyState`). Core reads only
    the level the policy is told; the guardrails read the rest (`halo.safety.gate.verdict`)."""

    @property
    def input_risk(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Turn:
    """A message's facts, set when it is made; a step that learns more (the screen's verdict, a
    photo's picture, a voice note's text) makes the next turn with `dataclasses.replace`."""

    envelope: Envelope
    policy: PolicyEngine
    safety: Screened | None = None  # a child's turn (and the family group): the screen's verdict (halo/safety)
    tool_budget: int = 12  # tool calls this message may make (llm.max_tool_calls)
    images: tuple[dict[str, str], ...] = ()  # photos shown to the model (halo/media/images.py)

    @property
    def scope(self) -> Scope:
        return self.envelope.scope

    @property
    def family(self) -> Family:
        """The live family (the policy is rebuilt when members change)."""
        return self.policy.family

    @property
    def member(self) -> Member | None:
        return self.envelope.speaker.member

    def decide(
        self, action: str, resource: Any = None, *, audit: bool = True, from_here: bool = True, **context: Any
    ) -> Decision:
        """The one way a turn asks the policy "may this speaker do X": about this turn's speaker,
        from this turn's scope (`from_here=False` for questions about who the person is, such
        as administering halo, that must work from a suspended group too). `audit=False` for
        routine reads made on every turn (the scope's own memory), which would flood the log.
        A guarded turn's requests carry the safety screen's level for its message (`input_risk`):
        the policy keeps a child's flagged words out of memory, lists and reminders on every path."""
        if self.safety is not None:
            context = {**context, "input_risk": self.safety.input_risk}
        return self.policy.decide(
            action,  # type: ignore[arg-type]
            principal=self.member,
            resource=self.scope if resource is None else resource,
            from_scope=self.scope if from_here else None,
            unknown_id=None if self.member else self.envelope.speaker.platform_user_id,
            context=context or None,
            audit=audit,
        )

    def allow_tool(self, tool: str, tool_class: str = "internal") -> Decision:
        return self.decide("use_tool", tool=tool, tool_class=tool_class)


@dataclass(slots=True)
class TurnRun:
    """One model run of a turn: the context the Agents SDK hands every tool, guardrail and hook
    (`RunContextWrapper[TurnRun]`). The turn's facts are `turn`'s: a child guardrail that finds
    more replaces it with the next turn, so the tools after it ask the policy under the stricter
    verdict. What the run does is kept here, read back by the model run that made it
    (halo/pipeline/model_run.py), and dropped with it."""

    turn: Turn
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (tool, arguments) made so far
    cut_short: str | None = None  # why tool work stopped early, said in the reply
    tool_steps: list[dict[str, Any]] = field(default_factory=list)  # finished calls and outputs (run_items.py)
    context_note: str = ""  # the volatile context (the time, recall) for the next model call (turn_agents.py)
