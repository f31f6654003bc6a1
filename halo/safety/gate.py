"""The child guardrails of a turn, and what halo does about their decisions.

Input: the deterministic floor runs first on every guarded turn (commands and `provider:
none` included); when a model will answer, the Agents SDK input guardrail (run before the
model, `run_in_parallel=False`) adds the cheap-model classification. Output: the SDK output
guardrail checks the reply before it is sent. The stricter of floor and classifier wins.

    high risk from a child   → escalate: a supportive reply in code, every parent told
    high risk from an adult  → (family group with children) a deflection to a private chat
    a blocked topic          → an age-appropriate deflection, the model's reply never sent
    an over-long reply       → shortened on a sentence boundary
    medium risk              → answered; parents told when the profile says so

Every classification above low is audited; nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from agents import Agent, GuardrailFunctionOutput, InputGuardrail, Model, OutputGuardrail, RunContextWrapper

from config.family import Family
from halo.safety import replies
from halo.safety.classifier import Direction, RiskClassifier
from halo.safety.notify import Notifier
from halo.safety.profiles import TurnProfile, parents_may_read, turn_profile
from halo.safety.screen import LOW, Assessment, screen, stricter
from halo.safety.topics import blocked_topic
from policy import PolicyEngine
from transcripts import AuditLog, TranscriptStore
from transcripts.lines import Note, SafetyMarks

if TYPE_CHECKING:
    from halo.core.turn import Turn, TurnRun

log = logging.getLogger(__name__)

InputAction = Literal["pass", "escalate", "deflect"]
OutputAction = Literal["pass", "shorten", "deflect"]


@dataclass(frozen=True, slots=True)
class SafetyState:
    """What the guardrails found in one turn (kept on the Turn). Frozen: each finding (the
    classifier's, the output check's, the parents told) makes the next state, and the turn
    that carries it, with `dataclasses.replace`."""

    limits: TurnProfile
    input: Assessment = LOW
    input_action: InputAction = "pass"
    output: Assessment | None = None
    output_action: OutputAction = "pass"
    notified: tuple[str, ...] = ()
    classifier_errors: tuple[str, ...] = ()

    @property
    def input_risk(self) -> str:
        """The screen's level for the message: what the policy is told (`Turn.decide`)."""
        return self.input.level

    @property
    def flagged(self) -> bool:
        """The screen found a risk above low, or a blocked topic, in the message."""
        return self.input.above_low or self.input.topic is not None

    @property
    def kept_out(self) -> bool:
        """A child's flagged words: not written to memory, a list or a reminder (the policy's
        `child-flagged-words-not-kept`, and `not_for_memory` on the transcript line)."""
        return self.limits.child is not None and self.flagged

    def marks(self, *, reply: bool = False) -> SafetyMarks:
        """The screen's verdict for a transcript line: on the message when it is recorded (the
        floor's), and on the line that answers it (with the classifier's, and what halo did)."""
        output = self.output if reply else None
        return SafetyMarks(
            risk=self.input.level,
            risk_category=self.input.category or None,
            risk_topic=self.input.topic or None,
            risk_source=self.input.source if reply else None,
            safety_action=self.input_action if reply else None,
            output_risk=output.level if output is not None else None,
            output_action=self.output_action if output is not None else None,
            not_for_memory=self.kept_out,
        )


@dataclass(frozen=True, slots=True)
class AgentGuard:
    """The model and guardrails a turn's agent is built with (`SafetyGate.for_agent`)."""

    model: Model | None
    input_guardrails: tuple[InputGuardrail[TurnRun], ...] = ()
    output_guardrails: tuple[OutputGuardrail[TurnRun], ...] = ()

    @property
    def guarded(self) -> bool:
        return bool(self.input_guardrails or self.output_guardrails)


class SafetyGate:
    """Decides and acts for guarded turns; adults' turns never reach it (`begin` returns None)."""

    def __init__(
        self,
        policy: PolicyEngine,
        notifier: Notifier,
        audit: AuditLog,
        transcripts: TranscriptStore,
        *,
        classifier: RiskClassifier | None = None,
        models: dict[str, Model] | None = None,
        classify_within: float | None = None,
    ) -> None:
        self.policy = policy
        self.notifier = notifier
        self.audit = audit
        self.transcripts = transcripts  # a safety event goes into the child's transcript
        self.classifier = classifier
        self.models = models or {}  # profile model key → a model other than the main one
        # a share of the reply deadline: past it the built-in screen decides alone
        self.classify_within = classify_within

    @property
    def family(self) -> Family:
        return self.policy.family

    def owned_models(self) -> list[Model]:
        """The per-profile models and the classifier's, for whoever closes them at shutdown."""
        found = list(self.models.values())
        if self.classifier is not None:
            found.append(self.classifier.model)
        return found

    def screen(self, turn: Turn) -> Turn:
        """The turn under the floor's verdict on its message (`turn.safety`), before anything else
        sees it: its transcript line carries it, the policy reads it (`input_risk`), every path
        after this one (a command, a code answer, the model) is answered under it. A turn that
        is not guarded has no verdict."""
        limits = turn_profile(self.family, turn.envelope)
        if not limits:
            return replace(turn, safety=None) if turn.safety is not None else turn
        found = self._floor(turn.envelope.text, limits)
        return replace(turn, safety=SafetyState(limits, found, _input_action(found, limits)))

    def for_agent(self, turn: Turn, model: Model | None) -> AgentGuard:
        """What the turn's agent runs with: the model (a child's profile may name its own) and,
        for a guarded turn, the classifier as the SDK's input and output guardrails."""
        state = verdict(turn)
        if state is None:
            return AgentGuard(model)
        return AgentGuard(
            self.models.get(state.limits.profile.model, model),
            (self.input_guardrail(),),
            (self.output_guardrail(),),
        )

    # --- input ------------------------------------------------------------------------

    def _floor(self, text: str, limits: TurnProfile) -> Assessment:
        found = screen(text)
        topic = blocked_topic(text, limits.profile.blocked_topics, self.family.safety.topics)
        return found if topic is None else stricter(found, Assessment(topic=topic))

    async def _screened(self, text: str, direction: Direction, state: SafetyState) -> tuple[Assessment, SafetyState]:
        """The floor and the classifier on `text`, the stricter of them; a classifier failure is
        kept on the state (audited when the turn settles) and the floor stands alone."""
        floor = self._floor(text, state.limits)
        if self.classifier is None or self.family.safety.classifier == "off":
            return floor, state
        try:
            async with asyncio.timeout(self.classify_within):
                classified = await self.classifier.classify(
                    text,
                    direction=direction,
                    age_group=state.limits.age_group,
                    topics=state.limits.profile.blocked_topics,
                )
        except Exception as exc:  # the floor still stands; the failure is audited
            error = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("safety classifier failed (%s): %s", direction, error)
            return floor, replace(state, classifier_errors=(*state.classifier_errors, error))
        return stricter(floor, classified), state

    async def screen_input(self, turn: Turn) -> tuple[str | None, Turn]:
        """The screen's verdict, before commands, code answers and the model: halo's reply when
        it decides alone (a high risk, a blocked topic), else None and the turn goes on under it."""
        if _state(turn).input_action == "pass":
            return None, turn
        return await self.act_on_input(turn)

    async def act_on_input(self, turn: Turn) -> tuple[str, Turn]:
        """The reply to an input the guardrails stopped; parents told for a child's high risk
        (the turn returned says who was)."""
        state = _state(turn)
        parents = self.family.parents
        child = state.limits.child
        age = child.age_group if child is not None and child.age_group else state.limits.age_group
        if state.input_action == "escalate":
            told = await self._alert_parents(
                turn, state.input, "replied calmly and suggested talking to a parent or trusted adult"
            )
            turn = replace(turn, safety=replace(state, notified=(*state.notified, *told)))
            return replies.supportive_reply(age, state.input, parents, self.family.safety.emergency_resources), turn
        if state.limits.child is None:  # an adult in a group with children
            return replies.group_deflection(state.input, self.family.safety.emergency_resources), turn
        return replies.deflection(age, parents), turn

    def input_guardrail(self) -> InputGuardrail[TurnRun]:
        """The SDK input guardrail: floor plus classifier, before the model starts."""

        async def child_input(ctx: RunContextWrapper[TurnRun], agent: Agent[Any], _: Any) -> GuardrailFunctionOutput:
            turn = ctx.context.turn
            found, state = await self._screened(turn.envelope.text, "input", _state(turn))
            state = replace(state, input=found, input_action=_input_action(found, state.limits))
            ctx.context.turn = replace(turn, safety=state)  # the tools' policy checks read the stricter verdict
            return GuardrailFunctionOutput(output_info=state, tripwire_triggered=state.input_action != "pass")

        return InputGuardrail(guardrail_function=child_input, name="child_input", run_in_parallel=False)

    async def watch(self, turn: Turn) -> None:
        """A child's message halo was not addressed in (the family group): no reply, but the
        screen's verdict still counts, and a high risk (or a medium one, per profile) still
        reaches the parents."""
        state = verdict(turn)
        if state is None or state.limits.child is None:
            return
        told: tuple[str, ...] = ()
        if state.input.level == "high" or (
            state.input.level == "medium" and state.limits.profile.notify_parents_on_medium
        ):
            told = await self._alert_parents(turn, state.input, "did not reply there (it was not addressed)")
        if state.input.above_low or state.input.topic:
            self._audit(turn, "input", state.input, "watch", replace(state, notified=told))

    # --- output -----------------------------------------------------------------------

    def output_guardrail(self) -> OutputGuardrail[TurnRun]:
        """The SDK output guardrail: a reply that may not be sent trips it; a long one is marked."""

        async def child_output(
            ctx: RunContextWrapper[TurnRun], agent: Agent[Any], output: Any
        ) -> GuardrailFunctionOutput:
            turn = ctx.context.turn
            text = str(output or "")
            found, state = await self._screened(text, "output", _state(turn))
            action = state.output_action
            if found.level == "high" or found.topic:
                action = "deflect"
            elif len(text.strip()) > state.limits.profile.max_reply_chars:
                action = "shorten"
            state = replace(state, output=found, output_action=action)
            ctx.context.turn = replace(turn, safety=state)
            return GuardrailFunctionOutput(output_info=state, tripwire_triggered=action == "deflect")

        return OutputGuardrail(guardrail_function=child_output, name="child_output")

    def deflect_output(self, turn: Turn) -> str:
        state = _state(turn)
        if state.limits.child is None and state.limits.group:
            return replies.group_deflection()
        return replies.deflection(state.limits.age_group, self.family.parents)

    def final_text(self, turn: Turn, text: str) -> tuple[str, Turn]:
        """The reply as it may be sent: shortened when the output guardrail said so. Also the
        last line of defence for a reply that never passed the output guardrail."""
        state = _state(turn)
        limit = state.limits.profile.max_reply_chars
        if len(text.strip()) > limit:
            action: OutputAction = "shorten" if state.output_action == "pass" else state.output_action
            return replies.shorten(text, limit), replace(turn, safety=replace(state, output_action=action))
        return text, turn

    @staticmethod
    def found_in(turn: Turn, tripped: GuardrailFunctionOutput) -> Turn:
        """The turn under what a guardrail that tripped had found (its `output_info`)."""
        found = tripped.output_info
        return replace(turn, safety=found) if isinstance(found, SafetyState) else turn

    # --- after the turn ---------------------------------------------------------------

    async def settle(self, turn: Turn) -> None:
        """Audit what the guardrails found; tell parents about a child's medium risk per profile."""
        state = _state(turn)
        child = state.limits.child
        if (
            state.input.level == "medium"
            and state.input_action != "escalate"
            and child is not None
            and state.limits.profile.notify_parents_on_medium
        ):
            did = "changed the subject" if state.input_action == "deflect" else "answered, suitably for their age"
            state = replace(state, notified=(*state.notified, *await self._alert_parents(turn, state.input, did)))
        if state.input.above_low or state.input.topic:
            self._audit(turn, "input", state.input, state.input_action, state)
        if state.output is not None and (state.output.above_low or state.output.topic):
            self._audit(turn, "output", state.output, state.output_action, state)
        elif state.output_action == "shorten":
            self.audit.write(
                "safety",
                scope_id=turn.scope.id,
                member=turn.envelope.speaker.label,
                direction="output",
                level="low",
                action="shorten",
                max_reply_chars=state.limits.profile.max_reply_chars,
            )
        for error in state.classifier_errors:
            self.audit.write("safety_classifier_error", scope_id=turn.scope.id, error=error)

    def _audit(self, turn: Turn, direction: str, found: Assessment, action: str, state: SafetyState) -> None:
        self.audit.write(
            "safety",
            scope_id=turn.scope.id,
            member=turn.envelope.speaker.label,
            direction=direction,
            level=found.level,
            category=found.category,
            topic=found.topic,
            source=found.source,
            action=action,
            age_group=state.limits.age_group,
            notified=list(state.notified) if direction == "input" else [],
        )

    async def _alert_parents(self, turn: Turn, found: Assessment, action: str) -> tuple[str, ...]:
        """One notification per parent; the child's words only to a parent the policy lets read
        that child's transcript (the decision is audited: it is a read). Returns who was told."""
        state = _state(turn)
        child = state.limits.child
        if child is None:
            return ()
        notified: list[str] = []
        where = (
            "in the family group"
            if turn.scope.type == "family_group"
            else f"in their private chat ({turn.envelope.platform})"
        )
        for parent in self.family.parents:
            try:
                words = turn.envelope.text if parents_may_read(self.policy, child, parent, audit=True) else None
                alert = replies.alert_text(child, turn.envelope.ts, where, found, words=words, action=action)
                await self.notifier.notify(
                    parent, alert.push, inbox_text=alert.inbox, kind="safety_alert", about=child.id
                )
            except Exception as exc:  # the child still gets their reply; the failure is loud
                log.exception("could not notify %s about %s", parent.id, child.id)
                self.audit.write(
                    "notification_failed", member=parent.id, about=child.id, error=f"{type(exc).__name__}: {exc}"[:300]
                )
                continue
            notified.append(parent.id)
        await self.transcripts.append(
            _event_line(
                turn,
                f"safety: {found.level} risk ({replies.label(found.category)}); parents told: "
                f"{', '.join(notified) or 'none configured'}",
            )
        )
        return tuple(notified)


def _input_action(found: Assessment, limits: TurnProfile) -> InputAction:
    if found.level == "high":
        return "escalate" if limits.child is not None else "deflect"
    return "deflect" if found.topic else "pass"


def verdict(turn: Turn) -> SafetyState | None:
    """What the guardrails found in this turn: None for a turn they do not guard."""
    return turn.safety if isinstance(turn.safety, SafetyState) else None


def _state(turn: Turn) -> SafetyState:
    state = verdict(turn)
    if state is None:
        raise RuntimeError("a guarded step ran on a turn that SafetyGate.begin did not guard")
    return state


def _event_line(turn: Turn, text: str) -> Note:
    return Note(
        id=uuid.uuid4().hex,
        ts=datetime.now(UTC),
        scope_id=turn.scope.id,
        text=text,
        speaker="halo",
        target=turn.envelope.speaker.label,
        platform=turn.envelope.platform,
    )
