"""Benchmark: a Telegram DM's first streamed text against its whole reply (issue 35).

halo runs with its Telegram adapter against the Bot API stand-in and a stand-in model that
writes 40 tokens a second (`--tokens` word-sized tokens). For each DM it measures, from the
moment the update is queued:
- the model's first token (the streamed request's arrival: the first token goes at once),
- the first draft (sendMessageDraft) the person sees,
- the reply sent as a message (sendMessage), which is what a person waited for before.

Goal: the first text appears within 1 s of the model's first token. The baseline, measured
in the same run, is the time to the whole reply: without drafts a person sees nothing until
then.

Run: `uv run python bench/telegram_stream.py [--messages 5] [--tokens 120]`. Exits 1 when
the goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config.loader import load_settings  # noqa: E402
from halo.runtime.app import build_halo  # noqa: E402
from tests.fakes.llm_server import FakeOpenAI, Reply  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.telegram_support import adapter_of, telegram_yaml  # noqa: E402

TOKENS_PER_SECOND = 40
FIRST_TEXT_LIMIT = 1.0  # seconds after the model's first token
MOM = 1002
FAMILY = """\
family: {name: Sharma, timezone: Europe/London}
members:
  - {id: wags, name: Wags, role: parent, telegram_user_id: 1001}
  - {id: mom,  name: Mom,  role: parent, telegram_user_id: 1002}
owner: wags
routing: {enabled: false}
memory: {semantic: {enabled: false}, distillation_enabled: false}
"""


def llm_yaml(fake: FakeOpenAI) -> str:
    return (
        "llm:\n  provider: openai-compatible\n  model: fake-model\n"
        f"  base_url: {fake.base_url}\n  api_key: bench-key\n  timeout_seconds: 60\n"
    )


async def first(predicate: object, within: float = 60.0) -> float:
    """The monotonic time at which `predicate()` first holds (polled every 5 ms)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = predicate()  # type: ignore[operator]
        if found is not None:
            return float(found)
        await asyncio.sleep(0.005)
    raise TimeoutError("the reply did not come")


async def run(messages: int, tokens: int) -> int:
    text = " ".join(f"word{n}" for n in range(tokens))
    home = Path(tempfile.mkdtemp(prefix="halo-bench-stream-"))
    async with FakeTelegram() as tg, FakeOpenAI() as model:
        (home / "halo.yaml").write_text(FAMILY + llm_yaml(model) + telegram_yaml(tg.base_url))
        halo = build_halo(load_settings(home))
        await halo.start_adapters()
        adapter = adapter_of(halo)
        await first(lambda: time.monotonic() if adapter.status()["connected"] else None)
        rows: list[tuple[float, float, float]] = []
        try:
            for n in range(messages):
                model.enqueue(Reply(text=text, pace=1 / TOKENS_PER_SECOND))
                asked = len(model.requests)
                drafts, sent = len(tg.calls_to("sendMessageDraft")), len(tg.sent(MOM))
                queued = time.monotonic()
                tg.message(MOM, MOM, f"Tell me a long story, part {n}")
                message_at = await first(
                    lambda sent=sent: tg.calls_to("sendMessage")[-1].at if len(tg.sent(MOM)) > sent else None
                )
                draft_at = tg.calls_to("sendMessageDraft")[drafts].at
                token_at = model.requests[asked].at
                rows.append((token_at - queued, draft_at - token_at, message_at - queued))
        finally:
            await halo.close()
    print(f"{messages} DMs, a reply of {tokens} tokens at {TOKENS_PER_SECOND} tokens/s:")
    print(f"{'':4}{'first token':>14}{'first draft after it':>22}{'whole reply':>14}")
    for n, (token, draft, whole) in enumerate(rows):
        print(f"{n:<4}{token:>13.3f}s{draft:>21.3f}s{whole:>13.3f}s")
    first_text = statistics.median(token + draft for token, draft, _ in rows)
    whole = statistics.median(w for _, _, w in rows)
    worst_after_token = max(draft for _, draft, _ in rows)
    print(f"median: first text {first_text:.3f}s after the DM, the whole reply (the baseline) {whole:.3f}s")
    print(f"first text after the model's first token: worst {worst_after_token:.3f}s (goal ≤ {FIRST_TEXT_LIMIT:.1f}s)")
    return 0 if worst_after_token <= FIRST_TEXT_LIMIT else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=120)
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args.messages, args.tokens)))


if __name__ == "__main__":
    main()
