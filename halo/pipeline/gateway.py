"""The message path: envelope → policy → transcript → command or model → transcript → reply.

Each scope handles one message at a time, in order; different scopes run concurrently.
A message counts as accepted once its transcript line is fsync'd; nothing after that
point may lose it, whatever the model does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast

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
from halo.media.images import MODEL_CANNOT_SEE, NO_VISION, CannotSee, PhotoReader
from halo.media.voice import NOT_SET_UP, CannotHear, Transcriber
from halo.pipeline.run_items import ToolSteps, input_items
from halo.pipeline.turn_agents import TurnAgents
from halo.routing.levels import Level, Route, route_of_answer
from halo.routing.router import small_reply
from halo.usage.budget import SPENT_REPLY
from halo.usage.meter import attributed
from memory.redact import redact
from policy import Decision
from transcripts import TranscriptLine
from transcripts.text import clean_text

if TYPE_CHECKING:
    from config.settings import LLMSettings
    from halo.commands.builtin import CommandRegistry
    from halo.family.groups import GroupGuard
    from halo.family.pairing import Pairing
    from halo.media.documents import Documents
    from halo.outbound.delivery import Delivery
    from halo.routing.router import Router
    from halo.safety.gate import SafetyGate
    from memory.service import MemoryService
    from policy import PolicyEngine
    from transcripts import AuditLog, TranscriptStore
    from transcripts.session import TranscriptSessions

log = logging.getLogger(__name__)

# "guarded": halo's own reply for a child's turn the guardrails stopped (escalation, deflection)
ReplyKind = Literal["model", "command", "denied", "silent", "kept", "no_model", "provider_error", "guarded"]
DeltaCallback = Callable[[str], Awaitable[None]]
ModelStartCallback = Callable[[], Awaitable[None]]
AfterTurnHook = Callable[[Turn, "Reply"], Awaitable[None]]
# answers made in code before the model is asked (status questions in work channels); None: not mine
Answerer = Callable[[Turn, ModelStartCallback | None], Awaitable[str | None]]

TOOL_STEPS = ToolSteps()
OPEN_MESSAGE_TAIL = 40  # lines read back to find a message a crash left open (its tool items sit after it)
PROVIDER_DOWN = "I can't reach my language model right now — your message is saved."
MUDDLED = "I got muddled answering that (nothing was done). Could you ask again, perhaps in other words?"
NO_MODEL = (
    "No language model is configured yet, so I can only answer commands (try /help). "
    "To talk freely, set llm.provider in halo.yaml (openai, openai-compatible or anthropic) "
    "with its api_key or base_url, or set HALO_LLM__PROVIDER and HALO_LLM__API_KEY."
)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the adapter should do: send `text`, or stay silent when it is None."""

    text: str | None
    scope_id: str
    kind: ReplyKind
    decision: Decision | None = None
    route: Route | None = None  # the level it was answered at, and why (halo/routing)


class Gateway:
    """Runs each message through policy, transcript, command or model; given exactly the parts
    a turn uses (the composition root, halo/runtime/app.py, builds them)."""

    def __init__(
        self,
        *,
        policy: PolicyEngine,
        groups: GroupGuard,
        pairing: Pairing,
        safety: SafetyGate,
        commands: CommandRegistry,
        transcripts: TranscriptStore,
        sessions: TranscriptSessions,
        memory: MemoryService,
        delivery: Delivery,
        audit: AuditLog,
        llm: LLMSettings,
        agents: TurnAgents,
        transcriber: Transcriber | None = None,
        photos: PhotoReader | None = None,
        documents: Documents | None = None,
        answerers: Sequence[Answerer] = (),
        after_turn: Sequence[AfterTurnHook] = (),
        locks: ScopeLocks | None = None,
        router: Router | None = None,
    ) -> None:
        self.policy = policy
        self.groups = groups
        self.pairing = pairing
        self.safety = safety
        self.commands = commands
        self.transcripts = transcripts
        self.sessions = sessions
        self.memory = memory
        self.delivery = delivery
        self.audit = audit
        self.llm = llm
        self.after_turn = list(after_turn)  # after each turn, in the background (memory, the index)
        self.agents = agents
        self.transcriber = transcriber  # voice notes to text (halo/media/voice.py); None: not set up
        self.photos = photos  # photos to image input (halo/media/images.py); None: halo cannot see them
        self.documents = documents  # documents read into the scope's files (halo/media/documents.py)
        self.answerers = list(answerers)  # asked in order before the model; the first answer wins
        self.locks = locks or ScopeLocks()  # shared with the catch-up and the admin API's scope work
        self.router = router  # which model level answers; None: always llm.model
        self._background: set[asyncio.Task[None]] = set()
        self.run_config = RunConfig(tracing_disabled=not llm.tracing, call_model_input_filter=agents.model_input)
        self._seen_since_start: set[str] = set()  # scopes whose transcript end was checked for an open message

    @property
    def background_tasks(self) -> int:
        """After-turn work not finished yet (a queue depth for /status)."""
        return len(self._background)

    async def handle(
        self,
        envelope: Envelope,
        on_delta: DeltaCallback | None = None,
        on_model_start: ModelStartCallback | None = None,
    ) -> Reply:
        """`on_delta` receives streamed reply text; `on_model_start` is awaited just before the
        model is asked (an adapter shows "typing…" from then on)."""
        async with self.locks.of(envelope.scope.id):
            envelope = await self.groups.current(envelope)
            if envelope.platform_message_id is not None and envelope.scope.id not in self._seen_since_start:
                self._seen_since_start.add(envelope.scope.id)
                # a chat app sends a message again when a crash kept it from being confirmed: it is in
                # the transcript already, answered (by the catch-up, halo/pipeline/missed.py) or not
                tail = await asyncio.to_thread(self.transcripts.tail, envelope.scope.id, OPEN_MESSAGE_TAIL)
                seen = [line for line in tail if _is_message(line, envelope.platform_message_id)]
                if seen:
                    found = open_message(tail)
                    if found is None or found.id != seen[-1].id:
                        return Reply(None, envelope.scope.id, "silent")  # answered already
                    return await self._answer_open(
                        replace(envelope, id=found.id, ts=found.ts), on_delta, on_model_start
                    )
            return await self._handle(self._turn(envelope), on_delta, on_model_start)

    async def answer_again(self, envelope: Envelope) -> Reply:
        """Answer a message already in the transcript that a crash left unanswered: the same turn,
        without recording the message a second time (halo/pipeline/missed.py). Silent when it
        was answered meanwhile (the chat app sent it again, and that answered it)."""
        async with self.locks.of(envelope.scope.id):
            found = await self._open_message(envelope.scope.id)
            if found is None or found.id != envelope.id:
                return Reply(None, envelope.scope.id, "silent")
            return await self._answer_open(await self.groups.current(envelope))

    async def _answer_open(
        self,
        envelope: Envelope,
        on_delta: DeltaCallback | None = None,
        on_model_start: ModelStartCallback | None = None,
    ) -> Reply:
        await self.sessions.take_up_last_message(envelope.scope.id)
        return await self._handle(self._turn(envelope), on_delta, on_model_start, recorded=True)

    async def _hear(self, turn: Turn) -> tuple[Turn, str | None]:
        """The turn with its voice note as text (after any caption), or why it was not heard."""
        env = turn.envelope
        assert env.voice is not None
        if self.transcriber is None:
            return turn, NOT_SET_UP
        try:
            heard = await self.transcriber.text(env.voice)
        except CannotHear as exc:
            return turn, str(exc)
        text = f"{env.text}\n{heard}" if env.text.strip() else heard
        return replace(turn, envelope=replace(env, text=text, voice=None, heard=True)), None

    async def _look(self, turn: Turn) -> str | None:
        """Shows the turn's photo to the model (`turn.images`), or says why it cannot."""
        photo = turn.envelope.attachment
        assert photo is not None
        if self.photos is None:
            return NO_VISION
        try:
            turn.images.append((await self.photos.picture(photo)).content_part())
        except CannotSee as exc:
            return str(exc)
        return None

    async def _take_in(self, turn: Turn) -> tuple[Turn, str | None, dict[str, str | bool]]:
        """What came with a message, made into the turn's input: a voice note heard, a photo shown,
        a document read into the scope's files (marked even when not for halo). Returns the turn,
        why something could not be taken in (said in code: no model turn), and the marks for the
        message's transcript line."""
        env = turn.envelope
        refusal: str | None = None
        marks: dict[str, str | bool] = {}
        if env.voice is not None and env.addressed:
            turn, refusal = await self._hear(turn)
            marks.update({"heard": True} if refusal is None else {"voice": "not transcribed"})
        attachment = turn.envelope.attachment
        if attachment is not None and attachment.kind == "image" and env.addressed:
            cannot_see = await self._look(turn)
            marks["photo"] = "shown" if cannot_see is None else "not shown"
            refusal = refusal or cannot_see
        elif attachment is not None and attachment.kind == "document" and self.documents is not None:
            turn, not_read = await self.documents.receive(turn)
            if not_read is not None:
                marks["document"] = "not read"
            refusal = refusal or not_read
        return turn, refusal, marks

    def _turn(self, envelope: Envelope) -> Turn:
        return Turn(envelope, self.policy, tool_budget=self.llm.max_tool_calls)

    async def _open_message(self, scope_id: str) -> TranscriptLine | None:
        tail = await asyncio.to_thread(self.transcripts.tail, scope_id, OPEN_MESSAGE_TAIL)
        return open_message(tail)

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
        decision = turn.decide("converse")
        if not decision.allowed:
            return await self._denied(turn, decision)
        refusal: str | None = None
        marks: dict[str, str | bool] = {}
        if not recorded:  # what came with it becomes input here, before safety, memory and the model see it
            turn, refusal, marks = await self._take_in(turn)
            env = turn.envelope
        model_input = _model_input(turn)  # the model's view, when it differs (who said it, in a group)
        if not recorded:
            await self._record(
                turn,
                "user",
                env.text or ("(photo)" if "photo" in marks else "(voice note)"),
                model_input=model_input if model_input != env.text else None,
                unaddressed=None if env.addressed else True,  # kept, not to be answered (even after a crash)
                message_id=env.platform_message_id,
                **marks,
            )
        if refusal is not None:  # said plainly, answered in code: no model turn on what it could not take in
            reply = Reply(refusal, env.scope.id, "command", decision)
            await self._record(turn, "assistant", refusal, reply="command", answers=env.id)
            self._after(turn, reply)
            return reply
        if not env.addressed:  # kept, not answered: the line is in the scope's history all the same
            await self.safety.watch(turn)  # a child's cry for help still reaches the parents
            reply = Reply(None, env.scope.id, "kept", decision)
            self._after(turn, reply)
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

        # `answers`: the message this line closes; a message without one was cut off by a crash
        level = reply.route.marks() if reply.route is not None else {}  # the level, on the line and in the log
        if reply.route is not None:
            self.audit.write("route", scope_id=env.scope.id, reply=reply.kind, **level)
        if reply.kind == "provider_error":
            await self._record(
                turn, "event", "model unavailable: the message was kept, no reply was made", answers=env.id, **level
            )
        elif reply.kind == "silent" or _budget_spent(reply):  # no answer needed (L0), or no model left
            what = "no reply needed" if reply.kind == "silent" else "the model budget is spent: the message was kept"
            await self._record(turn, "event", what, answers=env.id, **level)
        else:  # the reply line is what the model's history keeps of this turn (unless it is a command's)
            await self._record(turn, "assistant", reply.text or "", reply=reply.kind, answers=env.id, **level)
        await self.sessions.settle(env.scope.id)
        self._after(turn, reply)
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
            reply = Reply(command_reply, env.scope.id, "command", decision, route_of_answer(command_reply))
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

    async def _denied(self, turn: Turn, decision: Decision) -> Reply:
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

    async def _record(
        self, turn: Turn, role: Literal["user", "assistant", "event"], text: str, **fields: str | bool | None
    ) -> int:
        """Append a transcript line; `fields` (`model_input`, `reply`) are what the session reads."""
        env = turn.envelope
        target = env.target_member
        line = TranscriptLine(
            id=env.id if role == "user" else uuid.uuid4().hex,
            ts=env.ts if role == "user" else datetime.now(UTC),
            scope_id=env.scope.id,
            role=role,
            text=text,
            speaker=env.speaker.label if role == "user" else "halo",
            target=target.id if target else None,
            platform=env.platform,
            extra={k: v for k, v in fields.items() if v is not None},
        )
        return await self.transcripts.append(line)

    async def _run_agent(self, turn: Turn, on_delta: DeltaCallback | None, decision: Decision, route: Route) -> Reply:
        env = turn.envelope
        safety = self.safety if turn.safety is not None else None
        agent = self.agents.agent(turn, route.level)  # built once per model, tools and guard; instructions per turn
        session = self.sessions.get(env.scope.id)
        # the history is the transcript; the message (a photo's picture too) goes after it
        content: str | list[Any] = _model_input(turn)
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

    def _after(self, turn: Turn, reply: Reply) -> None:
        """After-reply work (distillation, indexing, compaction) never delays the reply."""
        for hook in self.after_turn:
            task = asyncio.create_task(self._run_hook(hook, turn, reply))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _run_hook(self, hook: AfterTurnHook, turn: Turn, reply: Reply) -> None:
        try:
            await hook(turn, reply)
        except Exception:
            log.exception("after-turn hook %s failed for %s", getattr(hook, "__name__", hook), turn.scope.id)

    async def drain(self) -> None:
        """Wait for after-turn work and deliveries in flight (on shutdown, and in tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.memory.flush_log()
        await self.delivery.drain()


def open_message(tail: list[TranscriptLine]) -> TranscriptLine | None:
    """The last person's message of a transcript's tail when no line after it closes it: a reply
    line, or an event that `answers` it. A message only kept (`unaddressed`) is not open."""
    for line in reversed(tail):
        if line.role == "assistant" or (line.role == "event" and "answers" in line.extra):
            return None  # the newest turn was answered (an older reply line without `answers` too)
        if line.role == "user":
            return None if line.extra.get("unaddressed") else line
    return None


def _budget_spent(reply: Reply) -> bool:
    """No model answered because the budget left none (the message stays in the model's history)."""
    return reply.kind == "no_model" and reply.route is not None and reply.route.capped


def _is_message(line: TranscriptLine, platform_message_id: str) -> bool:
    return line.role == "user" and line.extra.get("message_id") == platform_message_id


def _model_input(turn: Turn) -> str:
    """In a group several people talk: the model needs to know who said what; a voice note is
    marked as heard, not typed, and a photo as a photo (the picture itself goes with the turn
    it came in, as image input: later turns see this line)."""
    env = turn.envelope
    text = f"(voice note) {env.text}" if env.heard else env.text
    if env.attachment is not None and env.attachment.kind == "image":
        text = f"(photo) {text}".rstrip()
    if env.scope.type == "dm":
        return text
    name = env.speaker.member.name if env.speaker.member else env.speaker.label
    return f"[{name}] {text}"


def _describe_error(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = f"{type(exc).__name__}{f' {status}' if status else ''}: {exc}"
    return redact(text[:300])
