"""An agent's identity signature, worked out once instead of on every run.

The Agents SDK (0.24) computes a JSON signature of the starting agent (its settings, tools,
guardrails) twice on every `Runner.run`, to name agents for run-state resume, even when no
other agent shares its name and the signature is never compared: 1–3 ms a turn for halo's
agent, more than the rest of the SDK's run. An agent halo builds once and never changes has
one signature, so it is computed when the agent is built and remembered on the agent; every
other agent (a clone included: it does not carry the attribute) is signed as before.
"""

from __future__ import annotations

from typing import Any, TypeVar

from agents import Agent

try:  # a private function of the SDK: if a release renames it, agents are signed per run again
    import agents._run_state_agent_identity as identity

    _sdk_signature = identity._agent_identity_signature
except (ImportError, AttributeError):  # pragma: no cover - only with another SDK release
    identity = None  # type: ignore[assignment]

_ATTR = "_halo_identity_signature"
A = TypeVar("A", bound=Agent[Any])


def _signature(agent: Agent[Any]) -> str:
    remembered: str | None = agent.__dict__.get(_ATTR)
    return remembered if remembered is not None else _sdk_signature(agent)


def sign_once(agent: A) -> A:
    """Remember `agent`'s signature; only for an agent nothing changes after this call."""
    if identity is None:
        return agent
    identity._agent_identity_signature = _signature  # the SDK looks it up at call time
    agent.__dict__[_ATTR] = _sdk_signature(agent)
    return agent
