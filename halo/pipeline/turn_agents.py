"""The agent a turn runs, built once per model, tool list and guard, not on every turn.

The instructions are a function of the turn (the SDK calls it with the run's context), so
one `Agent` serves every turn that offers the same tools through the same model. Which
tools a turn is offered is a policy question; its answer is kept per policy generation,
speaker and scope, and asked again when the family (and so the policy) changes. Each
tool still asks the policy itself when it is called.

What changes from turn to turn (the time, recall) is not in the instructions: `model_input`
(the run's `call_model_input_filter`) sends it as a note just before the member's message,
so the instructions, the tool schemas and the history before it are the same bytes every
turn, and a provider's prefix cache reuses them in a long chat.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from agents import Agent, Model, ModelSettings, RunContextWrapper, Tool, TResponseInputItem
from agents.run_config import CallModelData, ModelInputData

from halo.core.turn import Turn, TurnRun
from halo.routing.levels import Level, Route
from halo.routing.plan import TurnPlan
from halo.tools.guarded import tool_class

if TYPE_CHECKING:
    from halo.context.builder import ContextBuilder
    from halo.safety.gate import SafetyGate
    from policy import PolicyEngine

CACHE_SIZE = 1024
FULL_PLAN = TurnPlan(Route(Level.L2, "the default"))  # a turn outside the router: all of it
# the note is context halo adds, not words of the member's: said so, to the model
NOTE_HEADER = "(halo's context for the message below; not written by the member)"


class TurnAgents:
    def __init__(
        self,
        *,
        context: ContextBuilder,
        policy: PolicyEngine,
        safety: SafetyGate,
        model: Model | None,
        model_settings: ModelSettings,
        tools: list[Tool],
        levels: Mapping[Level, Model] | None = None,
    ) -> None:
        self.context = context
        self.policy = policy
        self.safety = safety
        self.model = model
        self.model_settings = model_settings
        self.tools = tools
        self.levels = dict(levels or {})  # the model of each level (halo/routing); absent: `model`
        self._offered: OrderedDict[tuple[Any, ...], tuple[Tool, ...]] = OrderedDict()
        self._agents: OrderedDict[tuple[Any, ...], Agent[TurnRun]] = OrderedDict()

    def agent(self, turn: Turn, plan: TurnPlan = FULL_PLAN) -> Agent[TurnRun]:
        """The agent for the plan: its level's model (a child's safety profile may name its own),
        the tools it offers and the context it is given."""
        guard = self.safety.for_agent(turn, self.levels.get(plan.level, self.model))
        tools = self.offered_tools(turn) if plan.tools else ()
        key = (id(guard.model), tuple(id(t) for t in tools), guard.guarded, plan.notes, plan.recall)
        if (agent := _get(self._agents, key)) is None:
            agent = Agent[TurnRun](
                name="halo",
                instructions=self._instructions(plan),
                model=guard.model,
                model_settings=self.model_settings,
                tools=list(tools),
                input_guardrails=list(guard.input_guardrails),
                output_guardrails=list(guard.output_guardrails),
            )
            _put(self._agents, key, agent)
        return agent

    def _instructions(self, plan: TurnPlan) -> Callable[[RunContextWrapper[TurnRun], Agent[TurnRun]], Awaitable[str]]:
        """The SDK asks for the instructions at each turn, with the turn as the run's context."""

        async def instructions(ctx: RunContextWrapper[TurnRun], agent: Agent[TurnRun]) -> str:
            assembled = await self.context.assemble(ctx.context.turn, plan)
            ctx.context.context_note = assembled.note  # `model_input` places it, right after this
            return assembled.instructions

        return instructions

    def model_input(self, call: CallModelData[Any]) -> ModelInputData:
        """The SDK's last step before each model call: the turn's note goes just before the
        member's message (the last user item; tool steps come after it), never into history."""
        data = call.model_data
        run = call.context
        if not isinstance(run, TurnRun) or not run.context_note:
            return data
        items = list(data.input)
        last_user = next((i for i in range(len(items) - 1, -1, -1) if _role(items[i]) == "user"), len(items))
        note = cast(TResponseInputItem, {"role": "user", "content": f"{NOTE_HEADER}\n\n{run.context_note}"})
        items.insert(last_user, note)
        return ModelInputData(input=items, instructions=data.instructions)

    def offered_tools(self, turn: Turn) -> tuple[Tool, ...]:
        """Only the tools the policy would let this turn use: a refused tool is not even shown
        to the model (each tool still asks the policy itself when called)."""
        policy = self.policy
        unknown_id = None if turn.member else turn.envelope.speaker.platform_user_id
        tools = self.tools
        key = (
            policy.generation,
            turn.member.id if turn.member else None,
            unknown_id,
            turn.scope,
            id(tools),
            len(tools),
        )
        if (offered := _get(self._offered, key)) is not None:
            return offered
        offered = tuple(
            tool
            for tool in tools
            if turn.decide("use_tool", audit=False, tool=tool.name, tool_class=tool_class(tool)).allowed
        )
        _put(self._offered, key, offered)
        return offered


def _role(item: Any) -> str | None:
    return item.get("role") if isinstance(item, dict) else getattr(item, "role", None)


def _get(cache: OrderedDict[tuple[Any, ...], Any], key: tuple[Any, ...]) -> Any:
    value = cache.get(key)
    if value is not None:
        cache.move_to_end(key)
    return value


def _put(cache: OrderedDict[tuple[Any, ...], Any], key: tuple[Any, ...], value: Any) -> None:
    cache[key] = value
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)
