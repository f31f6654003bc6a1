"""Running the model: one Agents SDK run over the scope's history and the message, and every
way it can fail mapped into the person's reply. A provider failure, a model that misbehaves,
a run that takes too many steps or answers nothing: each is audited and said plainly, never a
crash; a guardrail that trips gets halo's own guarded reply. What the tools did stays in the
history even when the run fails."""

from __future__ import annotations

import logging
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

from halo.core.turn import Turn, TurnRun
from halo.media.images import MODEL_CANNOT_SEE
from halo.pipeline.intake import model_input
from halo.pipeline.model_health import ModelHealth
from halo.pipeline.reply import DeltaCallback, Reply
from halo.pipeline.run_items import ToolSteps, input_items
from halo.pipeline.turn_agents import TurnAgents
from halo.routing.plan import TurnPlan
from memory.redact import redact
from policy import Decision
from transcripts.text import clean_text

if TYPE_CHECKING:
    from config.settings import LLMSettings
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


class ModelRun:
    def __init__(
        self,
        agents: TurnAgents,
        sessions: TranscriptSessions,
        memory: MemoryService,
        audit: AuditLog,
        llm: LLMSettings,
        health: ModelHealth,
    ) -> None:
        self.agents = agents  # the agent for a turn at a level: model, tools, guardrails, instructions
        self.sessions = sessions  # the scope's history, read from its transcript
        self.memory = memory  # without a model, "remember …" is still kept (and said so)
        self.audit = audit
        self.llm = llm
        self.health = health  # the last model failure until a call succeeds (/status)
        # built once (it reads the environment); the changing note goes after the stable prefix
        self.run_config = RunConfig(tracing_disabled=not llm.tracing, call_model_input_filter=agents.model_input)

    @property
    def configured(self) -> bool:
        return self.agents.model is not None

    @property
    def deadline(self) -> float:
        """Seconds the whole answer may take (classifier, commands, retries, model, tools)."""
        return self.llm.reply_deadline_seconds

    def too_late(self, turn: Turn, decision: Decision) -> Reply:
        """No reply within the deadline: the message is kept, and the person told so."""
        log.warning("no reply for %s within %ss; the message is kept", turn.scope.id, self.deadline)
        self.audit.write("reply_deadline", scope_id=turn.scope.id, seconds=self.deadline)
        return Reply(PROVIDER_DOWN, turn.scope.id, "provider_error", decision)

    def no_model(self, turn: Turn, decision: Decision) -> Reply:
        """No language model is configured: say how to set one up."""
        text = turn.envelope.text
        noted = (
            "Noted — I'll keep that in this chat's memory (/memory shows it). "
            if self.memory.is_memory_request(text)
            else ""
        )
        return Reply(noted + NO_MODEL, turn.scope.id, "no_model", decision)

    async def answer(self, turn: Turn, decision: Decision, plan: TurnPlan, on_delta: DeltaCallback | None) -> Reply:
        """The model's reply as the turn's plan says (level, history, tools, context), or the reply
        that says why there is none; with what the run's guardrails found (`Reply.found`)."""
        run = TurnRun(turn)  # what this run's tools do: their calls, their steps, why they stopped early
        reply = await self._answer(run, decision, plan, on_delta)
        return replace(reply, found=run.turn.safety) if run.turn.safety is not turn.safety else reply

    async def _answer(self, run: TurnRun, decision: Decision, plan: TurnPlan, on_delta: DeltaCallback | None) -> Reply:
        turn = run.turn
        env = turn.envelope
        agent = self.agents.agent(turn, plan)  # built once per model, tools, guard and context; instructions per turn
        session = self.sessions.get(env.scope.id)
        # the history is the transcript; the message (a photo's picture too) goes after it
        content: str | list[Any] = model_input(turn)
        if turn.images:
            content = [{"type": "input_text", "text": content}, *turn.images]
        history = await session.get_items(plan.history_items)
        run_input = [*history, cast(TResponseInputItem, {"role": "user", "content": content})]
        max_turns = self.llm.max_model_turns
        try:
            try:
                result = await self._run(agent, run_input, run, on_delta)
            except Exception:  # what the tools did stays in the history; the rest of the run does not
                await session.add_items(cast(list[TResponseInputItem], run.tool_steps))
                raise
            await self.sessions.add_run(env.scope.id, input_items(result.new_items))  # tool calls: one append
            text = clean_text(str(result.final_output or "")).strip()  # a model can send a lone surrogate
        except (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered):
            # the child guardrails answer (halo/pipeline/guarded.py); the user's line is in the
            # session, and nothing of a stopped reply: the reply line halo writes is what it keeps
            raise
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
            self.health.failed(_describe_error(exc))
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
            self.health.failed("the answer had no text")
            return Reply(PROVIDER_DOWN, env.scope.id, "provider_error", decision)
        self.health.succeeded()
        if run.cut_short is not None:
            self.audit.write("turn_cut_short", scope_id=env.scope.id, reason=run.cut_short)
            text = f"{text}\n\n(I stopped looking things up early: {run.cut_short}.)"
        return Reply(text or "…", env.scope.id, "model", decision)

    async def _run(
        self, agent: Agent[TurnRun], run_input: list[TResponseInputItem], run: TurnRun, on_delta: DeltaCallback | None
    ) -> RunResult | RunResultStreaming:
        """One model run over the history and the message; streamed when someone shows the reply as it comes."""
        config, max_turns = self.run_config, self.llm.max_model_turns
        if on_delta is None:
            return await Runner.run(
                agent, run_input, context=run, run_config=config, max_turns=max_turns, hooks=TOOL_STEPS
            )
        result = Runner.run_streamed(
            agent, run_input, context=run, run_config=config, max_turns=max_turns, hooks=TOOL_STEPS
        )
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
                await on_delta(clean_text(event.data.delta))
        return result


def _describe_error(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = f"{type(exc).__name__}{f' {status}' if status else ''}: {exc}"
    return redact(text[:300])
