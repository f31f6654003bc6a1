"""The fake model servers speak the wire formats the real SDKs expect.

Every test drives a real client (openai, anthropic, the Agents SDK, any-llm) over HTTP, so
a fake that drifts from the real API fails here rather than in a test that uses it.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import anthropic
import openai
import pytest
from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.extensions.models.any_llm_model import AnyLLMModel
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.llm_server import FakeOpenAI, Reply, ToolCall


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
async def closing() -> AsyncIterator[AsyncExitStack]:
    """Closes the clients a test opens, so no socket outlives its event loop."""
    async with AsyncExitStack() as stack:
        yield stack


def openai_client(fake: FakeOpenAI, closing: AsyncExitStack, **options: object) -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="x", **options)
    closing.push_async_callback(client.close)
    return client


def anthropic_client(fake: FakeAnthropic, closing: AsyncExitStack, **options: object) -> anthropic.AsyncAnthropic:
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="x", **options)
    closing.push_async_callback(client.close)
    return client


@function_tool
def recall(query: str) -> str:
    """Look up what the family told the bot before."""
    return f"remembered: grandma's birthday is on {query}"


# --- openai SDK: chat completions --------------------------------------------------


async def test_chat_plain_reply_and_recording(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.reply("hello there")
    client = openai_client(fake_openai, closing)

    completion = await client.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "You are halo."},
            {"role": "user", "content": [{"type": "text", "text": "Who am I?"}]},
        ],
    )

    assert completion.choices[0].message.content == "hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "m"
    assert completion.usage is not None and completion.usage.completion_tokens == 2
    [request] = fake_openai.chat_requests
    assert request.headers["authorization"] == "Bearer x"
    assert request.json["model"] == "m"
    assert fake_openai.last_prompt_text() == "You are halo.\nWho am I?"


async def test_default_reply_and_responder_answer_when_the_queue_is_empty(closing: AsyncExitStack) -> None:
    async with FakeOpenAI(responder=lambda body: f"echo {body['messages'][-1]['content']}") as fake:
        fake.reply("scripted")
        client = openai_client(fake, closing)
        messages = [{"role": "user", "content": "ping"}]
        first = await client.chat.completions.create(model="m", messages=messages)
        second = await client.chat.completions.create(model="m", messages=messages)
    assert first.choices[0].message.content == "scripted"
    assert second.choices[0].message.content == "echo ping"

    async with FakeOpenAI() as fake:
        third = await openai_client(fake, closing).chat.completions.create(model="m", messages=messages)
    assert third.choices[0].message.content == "ok"


async def test_chat_stream_with_usage(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.reply("one two three")
    client = openai_client(fake_openai, closing)

    stream = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3


async def test_chat_tool_call_plain_and_streamed(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.tool_call("recall", {"query": "birthday"}, call_id="call_1")
    fake_openai.tool_calls(ToolCall("recall", {"query": "a"}), ToolCall("recall", {"query": "b"}))
    client = openai_client(fake_openai, closing)
    messages = [{"role": "user", "content": "when?"}]

    completion = await client.chat.completions.create(model="m", messages=messages)
    [call] = completion.choices[0].message.tool_calls or []
    assert completion.choices[0].finish_reason == "tool_calls"
    assert (call.id, call.function.name) == ("call_1", "recall")
    assert json.loads(call.function.arguments) == {"query": "birthday"}

    stream = await client.chat.completions.create(model="m", messages=messages, stream=True)
    arguments: dict[int, str] = {}
    names: dict[int, str] = {}
    async for chunk in stream:
        for delta in chunk.choices[0].delta.tool_calls or []:
            arguments[delta.index] = arguments.get(delta.index, "") + (delta.function.arguments or "")
            if delta.function.name:
                names[delta.index] = delta.function.name
    assert names == {0: "recall", 1: "recall"}
    assert [json.loads(arguments[i]) for i in (0, 1)] == [{"query": "a"}, {"query": "b"}]


async def test_embeddings_are_deterministic_unit_vectors(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    client = openai_client(fake_openai, closing)

    single = await client.embeddings.create(model="e", input="grandma")
    batch = await client.embeddings.create(model="e", input=["grandma", "grandpa"], encoding_format="float")
    short = await client.embeddings.create(model="e", input="grandma", dimensions=8)

    vector = single.data[0].embedding
    assert len(vector) == 64
    assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-5)
    assert vector == pytest.approx(FakeOpenAI.embed("grandma"), abs=1e-6)
    assert batch.data[0].embedding == pytest.approx(vector, abs=1e-6)
    assert batch.data[1].embedding != pytest.approx(vector, abs=1e-3)
    assert len(short.data[0].embedding) == 8
    assert [r.json["input"] for r in fake_openai.embedding_requests] == [
        "grandma",
        ["grandma", "grandpa"],
        "grandma",
    ]
    assert fake_openai.chat_requests == []


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, openai.AuthenticationError),
        (404, openai.NotFoundError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
async def test_http_errors_surface_as_sdk_errors(
    fake_openai: FakeOpenAI, closing: AsyncExitStack, status: int, error: type[openai.APIStatusError]
) -> None:
    fake_openai.error(status, "nope")
    client = openai_client(fake_openai, closing, max_retries=0)

    with pytest.raises(error) as raised:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])

    assert raised.value.status_code == status
    assert "nope" in raised.value.message
    if status == 429:
        assert raised.value.response.headers["retry-after"] == "1"


async def test_rate_limit_is_retried_after_retry_after(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.error(429, retry_after=0.1)
    fake_openai.reply("second try")
    client = openai_client(fake_openai, closing, max_retries=1)

    completion = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])

    assert completion.choices[0].message.content == "second try"
    assert len(fake_openai.chat_requests) == 2


async def test_delay_trips_the_client_timeout(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.delay(5)
    client = openai_client(fake_openai, closing, max_retries=0, timeout=0.2)

    with pytest.raises(openai.APITimeoutError):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


async def test_broken_stream_drops_the_connection(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.broken_stream("one two three four five six")
    fake_openai.broken_stream()
    client = openai_client(fake_openai, closing, max_retries=0)
    messages = [{"role": "user", "content": "hi"}]

    received: list[str] = []
    stream = await client.chat.completions.create(model="m", messages=messages, stream=True)
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert 0 < len("".join(received)) < len("one two three four five six")

    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(model="m", messages=messages)


# --- openai SDK: responses ---------------------------------------------------------


async def test_responses_plain_and_streamed(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.reply("plain answer")
    fake_openai.tool_call("recall", {"query": "x"})
    client = openai_client(fake_openai, closing)

    response = await client.responses.create(model="m", instructions="Be brief.", input="hi")
    assert response.output_text == "plain answer"
    assert fake_openai.last_prompt_text() == "Be brief.\nhi"

    async with client.responses.stream(model="m", input="hi") as stream:
        events = [event.type async for event in stream]
        final = await stream.get_final_response()
    [call] = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"query": "x"}
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert events.count("response.function_call_arguments.delta") == 2


# --- Agents SDK over OpenAI ----------------------------------------------------------


def chat_model(fake: FakeOpenAI, closing: AsyncExitStack) -> OpenAIChatCompletionsModel:
    return OpenAIChatCompletionsModel(model="m", openai_client=openai_client(fake, closing))


def responses_model(fake: FakeOpenAI, closing: AsyncExitStack) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(model="m", openai_client=openai_client(fake, closing))


@pytest.mark.parametrize("make_model", [chat_model, responses_model])
async def test_agent_returns_the_scripted_text(fake_openai: FakeOpenAI, closing: AsyncExitStack, make_model) -> None:
    fake_openai.reply("Hi Anna!")
    agent = Agent(name="halo", instructions="You are halo.", model=make_model(fake_openai, closing))

    result = await Runner.run(agent, "hello, I am Anna")

    assert result.final_output == "Hi Anna!"
    assert "You are halo." in fake_openai.last_prompt_text()
    assert "hello, I am Anna" in fake_openai.last_prompt_text()


@pytest.mark.parametrize("make_model", [chat_model, responses_model])
async def test_agent_runs_a_scripted_tool_call(fake_openai: FakeOpenAI, closing: AsyncExitStack, make_model) -> None:
    fake_openai.tool_call("recall", {"query": "May 3rd"})
    fake_openai.reply("It is on May 3rd.")
    agent = Agent(name="halo", model=make_model(fake_openai, closing), tools=[recall])

    result = await Runner.run(agent, "when is grandma's birthday?")

    assert result.final_output == "It is on May 3rd."
    assert len(fake_openai.model_requests) == 2
    assert "remembered: grandma's birthday is on May 3rd" in fake_openai.last_prompt_text()
    assert "remembered" not in fake_openai.prompt_text(fake_openai.model_requests[0])


@pytest.mark.parametrize("make_model", [chat_model, responses_model])
async def test_agent_streams(fake_openai: FakeOpenAI, closing: AsyncExitStack, make_model) -> None:
    fake_openai.tool_call("recall", {"query": "June"})
    fake_openai.reply("streamed reply here")
    agent = Agent(
        name="halo",
        model=make_model(fake_openai, closing),
        tools=[recall],
        model_settings=ModelSettings(include_usage=True),
    )

    result = Runner.run_streamed(agent, "stream please")
    deltas = [
        event.data.delta
        async for event in result.stream_events()
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta"
    ]

    assert result.final_output == "streamed reply here"
    assert "".join(deltas) == "streamed reply here"
    assert all(r.json["stream"] for r in fake_openai.model_requests)
    assert "remembered: grandma's birthday is on June" in fake_openai.last_prompt_text()
    assert result.context_wrapper.usage.requests == 2


async def test_agent_surfaces_a_rate_limit(fake_openai: FakeOpenAI, closing: AsyncExitStack) -> None:
    fake_openai.error(429)
    model = OpenAIChatCompletionsModel(model="m", openai_client=openai_client(fake_openai, closing, max_retries=0))

    with pytest.raises(openai.RateLimitError):
        await Runner.run(Agent(name="halo", model=model), "hi")


# --- anthropic SDK -------------------------------------------------------------------


async def test_anthropic_plain_reply_and_recording(fake_anthropic: FakeAnthropic, closing: AsyncExitStack) -> None:
    fake_anthropic.reply("hello from claude")
    client = anthropic_client(fake_anthropic, closing)

    message = await client.messages.create(
        model="claude-x",
        max_tokens=100,
        system="You are halo.",
        messages=[{"role": "user", "content": "hi"}],
    )

    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "hello from claude"
    assert message.stop_reason == "end_turn"
    [request] = fake_anthropic.messages_requests
    assert request.headers["x-api-key"] == "x"
    assert fake_anthropic.last_prompt_text() == "You are halo.\nhi"


async def test_anthropic_stream(fake_anthropic: FakeAnthropic, closing: AsyncExitStack) -> None:
    fake_anthropic.reply("streamed words arrive")
    fake_anthropic.reply("raw events")
    client = anthropic_client(fake_anthropic, closing)
    messages = [{"role": "user", "content": "hi"}]

    async with client.messages.stream(model="claude-x", max_tokens=100, messages=messages) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "streamed words arrive"
    assert final.content[0].text == text and final.stop_reason == "end_turn"

    raw = await client.messages.create(model="claude-x", max_tokens=100, messages=messages, stream=True)
    types = [event.type async for event in raw]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]


async def test_anthropic_tool_use_plain_and_streamed(fake_anthropic: FakeAnthropic, closing: AsyncExitStack) -> None:
    fake_anthropic.tool_call("recall", {"query": "x"}, text="Let me look.")
    fake_anthropic.tool_call("recall", {"query": "y"})
    client = anthropic_client(fake_anthropic, closing)
    messages = [{"role": "user", "content": "hi"}]

    message = await client.messages.create(model="claude-x", max_tokens=100, messages=messages)
    assert [block.type for block in message.content] == ["text", "tool_use"]
    assert (message.content[1].name, message.content[1].input) == ("recall", {"query": "x"})
    assert message.stop_reason == "tool_use"

    async with client.messages.stream(model="claude-x", max_tokens=100, messages=messages) as stream:
        final = await stream.get_final_message()
    [block] = final.content
    assert block.type == "tool_use" and block.input == {"query": "y"}


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
        (529, anthropic.OverloadedError),
    ],
)
async def test_anthropic_errors(
    fake_anthropic: FakeAnthropic, closing: AsyncExitStack, status: int, error: type[anthropic.APIStatusError]
) -> None:
    fake_anthropic.error(status)
    client = anthropic_client(fake_anthropic, closing, max_retries=0)

    with pytest.raises(error) as raised:
        await client.messages.create(model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}])

    assert raised.value.status_code == status
    assert raised.value.body["error"]["type"] in {"rate_limit_error", "api_error", "overloaded_error"}


# --- Agents SDK over Anthropic via any-llm ------------------------------------------


def any_llm_model(fake: FakeAnthropic, closing: AsyncExitStack) -> AnyLLMModel:
    model = AnyLLMModel(model="anthropic/claude-x", api_key="x", base_url=fake.base_url)
    closing.push_async_callback(model.close)
    return model


async def test_any_llm_agent_with_a_tool(fake_anthropic: FakeAnthropic, closing: AsyncExitStack) -> None:
    fake_anthropic.tool_call("recall", {"query": "May 3rd"})
    fake_anthropic.reply("It is on May 3rd.")
    agent = Agent(
        name="halo",
        instructions="You are halo.",
        model=any_llm_model(fake_anthropic, closing),
        model_settings=ModelSettings(max_tokens=512),
        tools=[recall],
    )

    result = await Runner.run(agent, "when is grandma's birthday?")

    assert result.final_output == "It is on May 3rd."
    first, second = fake_anthropic.messages_requests
    assert (first.json["model"], first.json["max_tokens"]) == ("claude-x", 512)
    assert "You are halo." in fake_anthropic.prompt_text(first)
    assert [tool["name"] for tool in first.json["tools"]] == ["recall"]
    assert "remembered: grandma's birthday is on May 3rd" in fake_anthropic.prompt_text(second)


async def test_any_llm_agent_streams(fake_anthropic: FakeAnthropic, closing: AsyncExitStack) -> None:
    fake_anthropic.tool_call("recall", {"query": "June"})
    fake_anthropic.reply("streamed from claude")
    agent = Agent(
        name="halo",
        model=any_llm_model(fake_anthropic, closing),
        model_settings=ModelSettings(max_tokens=512),
        tools=[recall],
    )

    result = Runner.run_streamed(agent, "hi")
    deltas = [
        event.data.delta
        async for event in result.stream_events()
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta"
    ]

    assert result.final_output == "streamed from claude"
    assert "".join(deltas) == "streamed from claude"
    assert "remembered: grandma's birthday is on June" in fake_anthropic.last_prompt_text()


@pytest.mark.filterwarnings("ignore:Provider-specific exceptions:DeprecationWarning")
async def test_a_base_url_with_v1_misses_and_is_recorded(fake_anthropic: FakeAnthropic) -> None:
    """The anthropic SDK appends /v1/messages itself, so `base_url` must not end in /v1."""
    model = AnyLLMModel(model="anthropic/claude-x", api_key="x", base_url=f"{fake_anthropic.base_url}/v1")
    try:
        with pytest.raises(anthropic.NotFoundError):
            await Runner.run(Agent(name="halo", model=model), "hi")
    finally:
        await model.close()

    assert [r.path for r in fake_anthropic.requests] == ["/v1/v1/messages"]
    assert fake_anthropic.model_requests == []


# --- lifecycle -----------------------------------------------------------------------


def test_servers_run_in_a_background_thread() -> None:
    fake = FakeOpenAI().start_in_thread()
    try:
        fake.enqueue(Reply(text="from the thread"))
        with openai.OpenAI(base_url=fake.base_url, api_key="x") as client:
            completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert completion.choices[0].message.content == "from the thread"
    finally:
        fake.stop()

    claude = FakeAnthropic().start_in_thread()
    try:
        with anthropic.Anthropic(base_url=claude.base_url, api_key="x") as client:
            message = client.messages.create(
                model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        assert message.content[0].text == "ok"
    finally:
        claude.stop()
