"""The level a message is answered at: rules first, a short triage call when they cannot
tell, then the caps — the policy's, in code, per member or age profile, and the budget's.

A level only chooses the model. What the turn may do — its tools, memory and recall — is
decided by the policy exactly as for any other turn.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from agents import Agent, Model, ModelSettings, RunConfig, Runner

from config.settings import RoutingSettings
from halo.routing.levels import Level, Route
from halo.routing.plan import TurnPlan, plan_for
from halo.routing.rules import Rules

if TYPE_CHECKING:
    from config.family import Member
    from halo.core.turn import Turn

log = logging.getLogger(__name__)

LastReply = Callable[[str], Awaitable[str | None]]
TRIAGE_INSTRUCTIONS = """You sort messages to a family assistant by how capable a model must be to answer well.
Answer with exactly one of: L1, L2, L3.
L1: small talk or a short general question that needs no tools, no memory and no reasoning.
L2: anything that needs the family's context, memory, tools, writing or explanation (the default).
L3: long or many-step requests: planning, comparing options, reasoning over a document.
When unsure, answer L2."""
TRIAGE_MAX_TOKENS = 16
_TRIAGE_ANSWER = re.compile(r"\bL([123])\b")


def profile_cap(member: Member | None) -> tuple[Level, str | None]:
    """The policy's cap, in code: a young child never gets the strong model, nor does a sender
    the family does not know."""
    if member is None:
        return Level.L2, "an unknown sender"
    if member.role == "child" and member.age_group == "young_child":
        return Level.L2, "a young child's profile"
    return Level.L3, None


class SpendCap(Protocol):
    """The budget's cap (halo/usage/budget.py): the highest level a member's spending still
    allows, and why it is lower, if it is."""

    async def cap(self, member_id: str | None) -> tuple[Level, str | None]: ...


class Triage:
    """One short call on the cheap model for a message the rules cannot place; its cost is
    recorded like any other call (the model given here is metered for "triage")."""

    def __init__(self, model: Model, *, tracing: bool = False, deadline_seconds: float = 10) -> None:
        self.agent = Agent(
            name="halo-triage",
            instructions=TRIAGE_INSTRUCTIONS,
            model=model,
            model_settings=ModelSettings(max_tokens=TRIAGE_MAX_TOKENS, temperature=0),
        )
        self.run_config = RunConfig(tracing_disabled=not tracing)
        self.deadline_seconds = deadline_seconds

    async def level(self, text: str) -> Level | None:
        try:
            result = await Runner.run(self.agent, text[:2000], run_config=self.run_config, max_turns=1)
        except Exception as exc:  # the triage is a hint: without it the message goes to L2
            log.warning("routing triage failed, using L2: %s", type(exc).__name__)
            return None
        found = _TRIAGE_ANSWER.search(str(result.final_output or ""))
        return Level(int(found.group(1))) if found else None


class Router:
    """`settings` is read at each message (halo.yaml's `routing:` applies live); the rules are
    rebuilt when it changes."""

    def __init__(
        self,
        settings: Callable[[], RoutingSettings],
        *,
        triage: Triage | None = None,
        budget: SpendCap | None = None,
        last_reply: LastReply | None = None,
    ) -> None:
        self.settings = settings
        self._rules: tuple[RoutingSettings, Rules] | None = None
        self.triage = triage
        self.budget = budget
        self.last_reply = last_reply

    @property
    def rules(self) -> Rules:
        settings = self.settings()
        if self._rules is None or self._rules[0] is not settings:
            rules = Rules(
                acknowledgements=settings.acknowledgements, greetings=settings.greetings, think_hard=settings.think_hard
            )
            self._rules = (settings, rules)
        return self._rules[1]

    async def route(self, turn: Turn) -> Route:
        wanted = await self.wanted(turn)
        return await self.capped(turn, wanted)

    async def plan(self, turn: Turn) -> TurnPlan:
        """The turn's level and everything that follows from it (halo/routing/plan.py)."""
        return plan_for(await self.route(turn), self.settings())

    async def wanted(self, turn: Turn) -> Route:
        """The least level that answers this message well, before any cap."""
        env = turn.envelope
        settings = self.settings()
        if not settings.enabled:
            return Route(Level.L2, "routing is off")
        attachment = env.attachment
        has_image = attachment is not None and attachment.kind == "image"
        has_document = attachment is not None and attachment.kind == "document"
        names = [m.name for m in turn.family.members]
        small = None if (has_image or has_document) else self.rules.small(env.text, names)
        # a greeting or goodbye answers nothing, even right after halo asked something
        if small is not None and (small in ("greeting", "farewell") or not await self._answers_a_question(turn)):
            return Route(Level.L0, f"{small}: no model needed", small=small)
        verdict = self.rules.judge(env.text, has_document=has_document, has_image=has_image, names=names)
        if verdict.level is not None:
            return Route(verdict.level, verdict.reason)
        if small is not None:  # "yes" to something halo asked: the model needs the conversation
            return Route(Level.L2, "answers halo's question")
        if self.triage is not None and settings.triage:
            level = await self.triage.level(env.text)
            if level is not None:
                return Route(level, f"triage: {level}")
        return Route(Level.L2, "the default")

    async def capped(self, turn: Turn, route: Route) -> Route:
        """`route` brought down to the policy's and the budget's caps."""
        if route.level == Level.L0:
            return route
        cap, why = profile_cap(turn.member)
        if self.budget is not None:
            spent_cap, spent_why = await self.budget.cap(turn.member.id if turn.member else None)
            if spent_cap < cap:
                cap, why = spent_cap, spent_why
        if route.level <= cap:
            return route
        return Route(cap, f"{route.reason}; capped: {why}", wanted=route.level)

    async def _answers_a_question(self, turn: Turn) -> bool:
        """A "yes" or "ok" right after halo asked something is an answer, not an acknowledgement."""
        if self.last_reply is None:
            return False
        last = await self.last_reply(turn.scope.id)
        return last is not None and last.rstrip().endswith("?")


SMALL_REPLIES = {
    "acknowledgement": "👍",
    "emoji": "👍",
    "thanks": "You're welcome!",
    "greeting": "Hi {name}! What can I do for you?",
    "farewell": "Bye for now, {name}!",
}


def small_reply(route: Route, turn: Turn, settings: RoutingSettings) -> str | None:
    """halo's own short answer to an L0 greeting, thanks or "ok", in a DM only (a group gets
    none, and so does a DM named in `routing.quiet_scopes` or with `small_replies` off)."""
    if route.small is None or turn.scope.type != "dm" or not settings.small_replies:
        return None
    if turn.scope.id in settings.quiet_scopes:
        return None
    template = SMALL_REPLIES.get(route.small)
    if template is None:
        return None
    if route.small == "farewell" and "night" in turn.envelope.text.lower():
        template = "Good night, {name}!"
    member = turn.member
    return template.format(name=member.name if member else "there").replace(" there!", "!")
