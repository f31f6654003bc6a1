"""The child guardrails as one step of the turn: the message screened in, the answer made
under that verdict, the reply checked on its way out, and what was found settled (audited,
parents told). A turn that is not guarded (an adult's, a group without children) passes
straight through.

Before this step the gateway puts the screen's floor verdict on the turn, so the message's
transcript line carries it (and `watch`es a child's message halo was not addressed in). The
classifier runs as the Agents SDK's guardrails inside the model run (`SafetyGate.for_agent`),
whose tripwires are answered here. The router, the code answers and the model run never call
the gate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from agents import InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered

from halo.core.turn import Turn
from halo.pipeline.reply import DeltaCallback, Reply
from halo.routing.levels import Level, Route
from policy import Decision

if TYPE_CHECKING:
    from halo.safety.gate import SafetyGate

# the answer under the guardrails: streamed to `on_delta`, or (a guarded turn) not at all
Answer = Callable[[DeltaCallback | None], Awaitable[Reply]]
SCREEN_ANSWERS = Route(Level.L0, "the safety screen answers")


class ChildGuardrails:
    """The gateway's answer step for a guarded turn (a child's, or the family group with children)."""

    def __init__(self, safety: SafetyGate) -> None:
        self.safety = safety

    async def answer(
        self, turn: Turn, decision: Decision, answer: Answer, on_delta: DeltaCallback | None
    ) -> tuple[Reply, Turn]:
        """`answer`, under the guardrails when the turn is guarded. A guarded reply is checked
        whole before anything of it is sent: it is not streamed. Returns the reply and the turn
        under what the guardrails found (the line that closes the turn carries it)."""
        if turn.safety is None:
            return await answer(on_delta), turn
        found = turn
        try:
            reply, found = await self._guarded(turn, decision, answer)
            return reply, found
        finally:
            await self.safety.settle(found)

    async def _guarded(self, turn: Turn, decision: Decision, answer: Answer) -> tuple[Reply, Turn]:
        safety, scope_id = self.safety, turn.scope.id
        stopped, turn = await safety.screen_input(turn)
        if stopped is not None:
            return Reply(stopped, scope_id, "guarded", decision, SCREEN_ANSWERS), turn
        try:
            reply = await answer(None)
        except InputGuardrailTripwireTriggered as tripped:  # the classifier found what the floor did not
            text, turn = await safety.act_on_input(safety.found_in(turn, tripped.guardrail_result.output))
            return Reply(text, scope_id, "guarded", decision), turn
        except OutputGuardrailTripwireTriggered as tripped:  # the model's reply may not be sent
            turn = safety.found_in(turn, tripped.guardrail_result.output)
            return Reply(safety.deflect_output(turn), scope_id, "guarded", decision), turn
        if reply.found is not None:  # what the guardrails found while the model ran
            turn = replace(turn, safety=reply.found)
        if reply.kind == "model" and reply.text:
            text, turn = safety.final_text(turn, reply.text)
            reply = replace(reply, text=text or "…")
        return reply, turn
