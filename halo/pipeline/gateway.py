"""The turn's sequence: admit → intake → record → answer in code → route → run the model →
close the turn → after the turn. Each step is a part named after what it does; the composition
root (halo/runtime/app.py) builds them and hands them in, so this file is the path of a message
and nothing else.

Each scope handles one message at a time, in order; different scopes run concurrently.
A message counts as accepted once its transcript line is fsync'd; nothing after that
point may lose it, whatever the model does. What a turn wrote to memory (a /remember, a
document, a /share) is in the store of record before the line that closes the turn: on
PostgreSQL, another process that takes the family after a crash has it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from halo.core.envelope import Envelope
from halo.core.scope_locks import ScopeLocks
from halo.core.scope_takers import ScopeTakers
from halo.core.turn import Turn
from halo.pipeline.reply import DeltaCallback, ModelStartCallback, Reply
from halo.routing.levels import Level, Route
from halo.routing.router import small_reply
from halo.usage.budget import SPENT_REPLY
from halo.usage.meter import attributed
from memory.store import MemoryStore, noting_writes
from policy import Decision

if TYPE_CHECKING:
    from halo.pipeline.admission import Admission
    from halo.pipeline.after_turn import AfterTurn
    from halo.pipeline.code_answers import CodeAnswers
    from halo.pipeline.guarded import ChildGuardrails
    from halo.pipeline.intake import Intake
    from halo.pipeline.model_run import ModelRun
    from halo.pipeline.resends import Resends
    from halo.pipeline.turn_log import TurnLog
    from halo.routing.router import Router
    from halo.safety.gate import SafetyGate


class Gateway:
    """Runs each message through its turn's steps, in order, under its scope's lock."""

    def __init__(
        self,
        *,
        locks: ScopeLocks,
        resends: Resends,
        admission: Admission,
        intake: Intake,
        turn_log: TurnLog,
        safety: SafetyGate,
        guardrails: ChildGuardrails,
        code_answers: CodeAnswers,
        router: Router,
        model_run: ModelRun,
        after_turn: AfterTurn,
        takers: ScopeTakers | None = None,
        memory: MemoryStore | None = None,
    ) -> None:
        self.locks = locks  # shared with the catch-up and the admin API's scope work
        self.resends = resends  # a message the chat app sent again after a crash
        self.admission = admission  # the group guard's view, the turn, the policy's converse decision
        self.intake = intake  # voice notes heard, photos shown, documents read (halo/media)
        self.turn_log = turn_log  # the message's transcript line, and the line that closes it
        self.safety = safety  # a guarded turn's verdict on its message, before its line is written
        self.guardrails = guardrails  # the child guardrails around the answer; other turns pass through
        self.code_answers = code_answers  # /commands, approvals, status: answered without a model
        self.router = router  # the model level a message is answered at (halo/routing)
        self.model_run = model_run  # the Agents SDK run, and its failures said plainly
        self.after_turn = after_turn  # distillation, the index, usage: in the background
        self.takers = takers or ScopeTakers()  # PostgreSQL: the scope's memory held here before first use
        self.memory = memory  # PostgreSQL: a turn's memory writes are in its rows before its reply

    @property
    def background_tasks(self) -> int:
        """After-turn work not finished yet (a queue depth for /status)."""
        return self.after_turn.pending

    async def handle(
        self,
        envelope: Envelope,
        on_delta: DeltaCallback | None = None,
        on_model_start: ModelStartCallback | None = None,
    ) -> Reply:
        """`on_delta` receives streamed reply text; `on_model_start` is awaited just before the
        model is asked (an adapter shows "typing…" from then on)."""
        async with self.locks.of(envelope.scope.id):
            await self.takers.ensure(envelope.scope.id)
            envelope = await self.admission.current(envelope)
            resend = await self.resends.check(envelope)  # sent again after a crash: never recorded twice
            if resend.kind == "answered":
                return Reply(None, envelope.scope.id, "silent")
            turn = self.admission.turn(resend.envelope)
            return await self._turn(turn, on_delta, on_model_start, recorded=resend.kind == "open")

    async def answer_again(self, envelope: Envelope) -> Reply:
        """Answer a message already in the transcript that a crash left unanswered: the same turn,
        without recording the message a second time (halo/pipeline/missed.py). Silent when it
        was answered meanwhile (the chat app sent it again, and that answered it)."""
        async with self.locks.of(envelope.scope.id):
            if not await self.resends.still_open(envelope):
                return Reply(None, envelope.scope.id, "silent")
            await self.takers.ensure(envelope.scope.id)
            envelope = await self.admission.current(envelope)
            await self.resends.take_up(envelope)
            return await self._turn(self.admission.turn(envelope), None, None, recorded=True)

    async def drain(self) -> None:
        """Wait for after-turn work and deliveries in flight (on shutdown, and in tests)."""
        await self.after_turn.drain()

    async def _turn(
        self,
        turn: Turn,
        on_delta: DeltaCallback | None,
        on_model_start: ModelStartCallback | None,
        *,
        recorded: bool,
    ) -> Reply:
        """The turn, start to end. Every model call in it, and in work it starts, counts for its
        member and scope (halo/usage)."""
        with attributed(turn.member.id if turn.member else None, turn.scope.id), noting_writes() as written:
            # 1. admit: may this speaker converse here? (a refusal is said, or silence, and audited)
            decision, refused = await self.admission.admit(turn)
            if refused is not None:
                return refused

            # 2. intake, then record: what came with the message becomes input before safety,
            # memory and the model see it; once its line is written the message is accepted
            cannot_take_in: str | None = None
            if not recorded:
                taken = await self.intake.take_in(turn)
                # a guarded turn's verdict, on its line and every path after it
                taken = replace(taken, turn=self.safety.screen(taken.turn))
                turn, cannot_take_in = taken.turn, taken.refusal
                await self.turn_log.message(taken)
            else:  # its line was written before a restart: the verdict again, for the paths after it
                turn = self.safety.screen(turn)
            if cannot_take_in is not None:  # said plainly, in code: no model turn on what it could not take in
                return await self._close(turn, Reply(cannot_take_in, turn.scope.id, "command", decision), written)
            if not turn.envelope.addressed:  # kept, not answered: the line is in the scope's history all the same
                await self.safety.watch(turn)  # a child's cry for help still reaches the parents
                await self._recorded(written)  # a document it brought is kept for good
                reply = Reply(None, turn.scope.id, "kept", decision)
                self.after_turn.start(turn, reply)
                return reply

            # 3. answer, within one deadline, under the child guardrails (a child's turn, or the
            # family group with children): the message screened in, the reply checked out
            async def answer(stream: DeltaCallback | None) -> Reply:
                try:  # everything in the turn (classifier, commands, retries, model, tools) shares the deadline
                    async with asyncio.timeout(self.model_run.deadline):
                        return await self._answer(turn, decision, stream, on_model_start)
                except TimeoutError:
                    return self.model_run.too_late(turn, decision)

            reply, turn = await self.guardrails.answer(turn, decision, answer, on_delta)

            # 4. close the turn: what it wrote to memory recorded, its line, then the work after it
            return await self._close(turn, reply, written)

    async def _answer(
        self,
        turn: Turn,
        decision: Decision,
        on_delta: DeltaCallback | None,
        on_model_start: ModelStartCallback | None,
    ) -> Reply:
        """Answered in code, or routed to a level and the model. Whatever answers, it answers
        under the screen's verdict: the policy reads it (halo/core/turn.py), so a child's flagged
        words are not kept by a command, a code answer or a tool."""
        scope_id = turn.scope.id
        in_code = await self.code_answers.answer(turn, on_model_start)
        if in_code is not None:
            return Reply(in_code.text, scope_id, "command", decision, in_code.route, offered=in_code.offered)
        if not self.model_run.configured:
            return self.model_run.no_model(turn, decision)

        plan = await self.router.plan(turn)
        if plan.level == Level.L0:
            return self._without_model(turn, decision, plan.route)
        if on_model_start is not None:
            await on_model_start()
        reply = await self.model_run.answer(turn, decision, plan, on_delta)
        return replace(reply, route=plan.route)

    async def _recorded(self, written: set[str]) -> None:
        """The memory files this turn wrote, in the store of record (PostgreSQL) now, not within
        the next second: the reply may say "remembered", and the turn is not closed before
        that is true. The after-turn work stays behind the reply: a distillation is redone from
        the transcript by the next process to take the scope (memory/service.py `catch_up`), and
        the day's log may lose its last second, as a power cut would."""
        if written and self.memory is not None:
            await self.memory.flush()

    def _without_model(self, turn: Turn, decision: Decision, route: Route) -> Reply:
        """L0: thanks or a greeting gets halo's own short answer (or none); a message the budget
        leaves no model for gets a plain reply, and stays in the history for later."""
        scope_id = turn.scope.id
        if route.small is None:
            return Reply(SPENT_REPLY, scope_id, "no_model", decision, route)
        text = small_reply(route, turn, self.router.settings())
        return Reply(text, scope_id, "command" if text else "silent", decision, route)

    async def _close(self, turn: Turn, reply: Reply, written: set[str]) -> Reply:
        await self._recorded(written)
        await self.turn_log.close(turn, reply)  # written before the reply is queued: a crash leaves it open
        self.after_turn.start(turn, reply)
        return reply
