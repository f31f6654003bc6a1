"""The message path: envelope → policy → transcript → command or model → transcript → reply.

Each scope handles one message at a time, in order; different scopes run concurrently.
A message counts as accepted once its transcript line is fsync'd; nothing after that
point may lose it, whatever the model does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    ModelBehaviorError,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    Runner,
    RunResult,
    RunResultStreaming,
    TResponseInputItem,
)
from openai.types.responses import ResponseTextDeltaEvent

from halo.core.envelope import Envelope
from halo.core.scope_locks import ScopeLocks
from halo.core.turn import Turn
from halo.media.images import MODEL_CANNOT_SEE
from halo.pipeline.admission import Admission
from halo.pipeline.after_turn import AfterTurn
from halo.pipeline.intake import Intake, model_input
from halo.pipeline.reply import Answerer, DeltaCallback, ModelStartCallback, Reply
from halo.pipeline.resends import Resends
from halo.pipeline.run_items import ToolSteps, input_items
from halo.pipeline.turn_agents import TurnAgents
from halo.pipeline.turn_log import TurnLog
from halo.routing.levels import Level, Route
from halo.routing.router import small_reply
from halo.usage.budget import SPENT_REPLY
from halo.usage.meter import attributed
from memory.redact import redact
from policy import Decision
from transcripts.text import clean_text

if TYPE_CHECKING:
    from config.settings import LLMSettings
    from halo.commands.builtin import CommandRegistry
    from halo.routing.router import Router
    from halo.safety.gate import SafetyGate
    from memory.service import MemoryService
    from transcripts import AuditLog
    from transcripts.session import TranscriptSessions

log = logging.getLogger(__name__)

TOOL_STEPS = ToolSteps()
PROVIDER_DOWN = "I can't reach my language model right now — your message is saved."
MUDDLED = "I got muddled answering that (nothing was done). Could you ask again, perhaps in other words?"
NO_MODEL = (
    "No language model is configured yet, so I can only answer commands (try /help). "
    "To talk freely, set llm.provider in halo.yaml (openai, openai-compatible or anthropic) "
    "with its api_key or base_url, or set HALO_LLM__PROVIDER and HALO_LLM__API_KEY."
)


class Gateway:
    """Runs each message through policy, transcript, command or model; given exactly the parts
    a turn uses (the composition root, halo/runtime/app.py, builds them)."""

    def __init__(
        self,
        *,
        admission: Admission,
        safety: SafetyGate,
        commands: CommandRegistry,
        turn_log: TurnLog,
        sessions: TranscriptSessions,
        memory: MemoryService,
        audit: AuditLog,
        llm: LLMSettings,
        agents: TurnAgents,
        intake: Intake,
        answerers: Sequence[Answerer] = (),
        after_turn: AfterTurn,
        resends: Resends,
        locks: ScopeLocks | None = None,
        router: Router | None = None,
    ) -> None:
        self.admission = admission  # the group guard's view, the turn, the policy's converse decision
        self.safety = safety
        self.commands = commands
        self.turn_log = turn_log  # the message's transcript line, and the line that closes it
        self.sessions = sessions
        self.memory = memory
        self.audit = audit
        self.llm = llm
        self.after_turn = after_turn  # distillation, the index, usage: in the background
        self.agents = agents
        self.intake = intake  # voice notes heard, photos shown, documents read (halo/media)
        self.answerers = list(answerers)  # asked in order before the model; the first answer wins
        self.resends = resends  # a message the chat app sent again after a crash
        self.locks = locks or ScopeLocks()  # shared with the catch-up and the admin API's scope work
        self.router = router  # which model level answers; None: always llm.model
        self.run_config = RunConfig(tracing_disabled=not llm.tracing)  # built once: it reads the environment

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
            envelope = await self.admission.current(envelope)
            resend = await self.resends.check(envelope)  # sent again after a crash: never recorded twice
            if resend.kind == "answered":
                return Reply(None, envelope.scope.id, "silent")
            recorded = resend.kind == "open"
            return await self._handle(self.admission.turn(resend.envelope), on_delta, on_model_start, recorded=recorded)

    async def answer_again(self, envelope: Envelope) -> Reply:
        """Answer a message already in the transcript that a crash left unanswered: the same turn,
        without recording the message a second time (halo/pipeline/missed.py). Silent when it
        was answered meanwhile (the chat app sent it again, and that answered it)."""
        async with self.locks.of(envelope.scope.id):
            if not await self.resends.still_open(envelope):
                return Reply(None, envelope.scope.id, "silent")
            envelope = await self.admission.current(envelope)
            await self.resends.take_up(envelope)
            return await self._handle(self.admission.turn(envelope), None, None, recorded=True)

    async def _handle(
        self,
        turn: Turn,
        on_delta: DeltaCallback | None,
        on_model_start: ModelStartCallback | None,
        *,
        recorded: bool = False,
    ) -> Reply:
        """Every model call of the turn, and of work it starts, counts for its member and scope."""
        with attributed(turn.member.id if turn.member else None, turn.scope.id):
            return await self._handle_turn(turn, on_delta, on_model_start, recorded=recorded)

    async def _handle_turn(
        self,
        turn: Turn,
        on_delta: DeltaCallback | None,
        on_model_start: ModelStartCallback | None,
        *,
        recorded: bool = False,
    ) -> Reply:
        env = turn.envelope
        decision, refused = await self.admission.admit(turn)  # the policy: may this speaker converse here?
        if refused is not None:
            return refused
        refusal: str | None = None
        if not recorded:  # what came with it becomes input here, before safety, memory and the model see it
            taken = await self.intake.take_in(turn)
            turn, refusal, env = taken.turn, taken.refusal, taken.turn.envelope
            await self.turn_log.message(taken)  # accepted: nothing after this may lose it
        if refusal is not None:  # said plainly, answered in code: no model turn on what it could not take in
            reply = Reply(refusal, env.scope.id, "command", decision)
            await self.turn_log.close(turn, reply)
            self.after_turn.start(turn, reply)
            return reply
        if not env.addressed:  # kept, not answered: the line is in the scope's history all the same
            await self.safety.watch(turn)  # a child's cry for help still reaches the parents
            reply = Reply(None, env.scope.id, "kept", decision)
            self.after_turn.start(turn, reply)
            return reply

        # the child guardrails: only a child's turn, or the family group with children, pays for them
        safety = self.safety if self.safety.begin(turn) is not None else None
        deadline = self.llm.reply_deadline_seconds
        try:  # everything in the turn (classifier, commands, retries, model, tools) shares one deadline
            async with asyncio.timeout(deadline):
                reply = await self._answer(turn, decision, safety, on_delta, on_model_start)
        except TimeoutError:
            log.warning("no reply for %s within %ss; the message is kept", env.scope.id, deadline)
            self.audit.write("reply_deadline", scope_id=env.scope.id, seconds=deadline)
            reply = Reply(PROVIDER_DOWN, env.scope.id, "provider_error", decision)
        if safety is not None:
            await safety.settle(turn)

        await self.turn_log.close(turn, reply)
        self.after_turn.start(turn, reply)
        return reply

    async def _answer(
        self,
        turn: Turn,
        decision: Decision,
        safety: Any,
        on_delta: DeltaCallback | None,
        on_model_start: ModelStartCallback | None,
    ) -> Reply:
        env = turn.envelope
        stopped = await safety.screen_input(turn) if safety is not None else None
        command_reply = None if stopped is not None else await self.commands.run(turn, env.text)
        if stopped is None and command_reply is None:
            command_reply = await self._answer_in_code(turn, on_model_start)
        if stopped is not None:
            reply = Reply(stopped, env.scope.id, "guarded", decision)
        elif command_reply is not None:
            reply = Reply(
                command_reply, env.scope.id, "command", decision, Route(Level.L0, "a command or code answers")
            )
        elif self.agents.model is None:
            noted = (
                "Noted — I'll keep that in this chat's memory (/memory shows it). "
                if self.memory.is_memory_request(env.text)
                else ""
            )
            reply = Reply(noted + NO_MODEL, env.scope.id, "no_model", decision)
        else:
            route = await self.router.route(turn) if self.router is not None else Route(Level.L2, "routing is off")
            if route.level == Level.L0:
                return self._without_model(turn, decision, route)
            if on_model_start is not None:
                await on_model_start()
            # a guarded reply is checked whole before anything of it is sent: no streaming
            reply = await self._run_agent(turn, None if safety is not None else on_delta, decision, route)
            reply = replace(reply, route=route)
        return reply

    def _without_model(self, turn: Turn, decision: Decision, route: Route) -> Reply:
        """L0: thanks or a greeting gets halo's own short answer (or none); a message the budget
        leaves no model for gets a plain reply, and stays in the history for later."""
        scope_id = turn.scope.id
        if route.small is None:
            return Reply(SPENT_REPLY, scope_id, "no_model", decision, route)
        assert self.router is not None
        text = small_reply(route, turn, self.router.settings)
        return Reply(text, scope_id, "command" if text else "silent", decision, route)

    async def _answer_in_code(self, turn: Turn, on_model_start: ModelStartCallback | None) -> str | None:
        for answer in self.answerers:
            text = await answer(turn, on_model_start)
            if text is not None:
                return text
        return None

    async def _run_agent(self, turn: Turn, on_delta: DeltaCallback | None, decision: Decision, route: Route) -> Reply:
        env = turn.envelope
        safety = self.safety if turn.safety is not None else None
        agent = self.agents.agent(turn, route.level)  # built once per model, tools and guard; instructions per turn
        session = self.sessions.get(env.scope.id)
        # the history is the transcript; the message (a photo's picture too) goes after it
        content: str | list[Any] = model_input(turn)
        if turn.images:
            content = [{"type": "input_text", "text": content}, *turn.images]
        run_input = [*await session.get_items(), cast(TResponseInputItem, {"role": "user", "content": content})]
        max_turns = self.llm.max_model_turns
        try:
            try:
                result = await self._run(agent, run_input, turn, on_delta)
            except Exception:  # what the tools did stays in the history; the rest of the run does not
                await session.add_items(cast(list[TResponseInputItem], turn.tool_steps))
                raise
            await self.sessions.add_run(env.scope.id, input_items(result.new_items))  # tool calls: one append
            text = clean_text(str(result.final_output or "")).strip()  # a model can send a lone surrogate
        except (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered) as tripped:
            # the user's line is in the session, and nothing of a stopped reply: the reply line
            # halo writes next is what the model's history keeps
            assert safety is not None
            if isinstance(tripped, InputGuardrailTripwireTriggered):
                text = await safety.act_on_input(turn)
            else:
                text = safety.deflect_output(turn)
            return Reply(text, env.scope.id, "guarded", decision)
        except MaxTurnsExceeded:
            log.warning("the model took more than %d steps for %s; stopped", max_turns, env.scope.id)
            self.audit.write("turn_cut_short", scope_id=env.scope.id, reason="max_model_turns", limit=max_turns)
            return Reply(
                f"I stopped after {max_turns} steps without finishing (llm.max_model_turns). "
                "Could you ask a narrower question?",
                env.scope.id,
                "model",
                decision,
            )
        except ModelBehaviorError as exc:  # e.g. a call to a tool this turn was not offered: nothing ran
            log.warning("the model misbehaved for %s: %s", env.scope.id, _describe_error(exc))
            self.audit.write("model_misbehaved", scope_id=env.scope.id, error=_describe_error(exc))
            return Reply(MUDDLED, env.scope.id, "provider_error", decision)
        except Exception as exc:  # any provider failure becomes a clear reply, never a crash
            log.warning("model run failed for %s: %s", env.scope.id, _describe_error(exc))
            self.audit.write(
                "provider_error",
                scope_id=env.scope.id,
                provider=self.llm.provider,
                error=_describe_error(exc),
            )
            if turn.images and getattr(exc, "status_code", None) in (400, 415, 422):
                return Reply(MODEL_CANNOT_SEE, env.scope.id, "provider_error", decision)
            return Reply(PROVIDER_DOWN, env.scope.id, "provider_error", decision)
        if not text:  # nothing readable came back (an empty or unparseable answer): say so, never "…"
            log.warning("model answered %s with no text", env.scope.id)
            self.audit.write("provider_error", scope_id=env.scope.id, error="the answer had no text")
            return Reply(PROVIDER_DOWN, env.scope.id, "provider_error", decision)
        if turn.cut_short is not None:
            self.audit.write("turn_cut_short", scope_id=env.scope.id, reason=turn.cut_short)
            text = f"{text}\n\n(I stopped looking things up early: {turn.cut_short}.)"
        if safety is not None:
            text = safety.final_text(turn, text)
        return Reply(text or "…", env.scope.id, "model", decision)

    async def _run(
        self, agent: Agent[Turn], run_input: list[TResponseInputItem], turn: Turn, on_delta: DeltaCallback | None
    ) -> RunResult | RunResultStreaming:
        """One model run over the history and the message; streamed when someone shows the reply as it comes."""
        config, max_turns = self.run_config, self.llm.max_model_turns
        if on_delta is None:
            return await Runner.run(
                agent, run_input, context=turn, run_config=config, max_turns=max_turns, hooks=TOOL_STEPS
            )
        result = Runner.run_streamed(
            agent, run_input, context=turn, run_config=config, max_turns=max_turns, hooks=TOOL_STEPS
        )
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
                await on_delta(clean_text(event.data.delta))
        return result

    async def drain(self) -> None:
        """Wait for after-turn work and deliveries in flight (on shutdown, and in tests)."""
        await self.after_turn.drain()


def _describe_error(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = f"{type(exc).__name__}{f' {status}' if status else ''}: {exc}"
    return redact(text[:300])
