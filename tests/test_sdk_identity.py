"""An agent halo builds once is signed once: the same signature the SDK would compute, and
an agent changed from it (a clone) is signed afresh."""

from __future__ import annotations

import agents._run_state_agent_identity as identity
from agents import Agent, ModelSettings, function_tool

from halo.pipeline.sdk_identity import sign_once


@function_tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


def test_a_signed_agent_keeps_the_sdks_signature_and_a_clone_is_signed_afresh():
    agent = Agent(name="halo", instructions="Be kind.", tools=[lookup], model_settings=ModelSettings(temperature=0.2))
    computed = identity._agent_identity_signature(agent)

    sign_once(agent)

    assert identity._agent_identity_signature(agent) == computed
    assert identity._build_agent_identity_map(agent) == {"halo": agent}
    other = agent.clone(instructions="Be brief.")
    assert identity._agent_identity_signature(other) != computed
    assert "Be brief." in identity._agent_identity_signature(other)
