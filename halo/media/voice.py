"""Voice notes become text through the provider's transcription endpoint
(`/v1/audio/transcriptions`, `llm.transcription_model`), before the policy's later checks, the
child-safety screen, memory and the model see them: from then on a heard message is a typed
one, marked as heard. The audio itself is not kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from openai import AsyncOpenAI, OpenAIError

from config.settings import LLMSettings
from halo.core.envelope import VoiceNote

log = logging.getLogger(__name__)

NOT_SET_UP = (
    "I got your voice note, but I can't listen to voice notes here yet (no transcription model is set up: "
    "llm.transcription_model). Could you type it? Your message is kept."
)
TOO_LONG = "That voice note is too long for me ({what}). Could you send a shorter one, or type it?"
NOT_HEARD = "I couldn't make out that voice note just now. Could you try again, or type it? Your message is kept."


# each transcription's reported usage, for halo's usage table: model, input, cached, output tokens
UsageSink = Callable[[str, int, int, int], Awaitable[None]]


class CannotHear(Exception):
    """The voice note was not transcribed; the message says why, for the person."""


class Transcriber:
    def __init__(
        self,
        client: AsyncOpenAI,
        model: str,
        *,
        max_bytes: int,
        max_seconds: int,
        timeout: float,
        on_usage: UsageSink | None = None,
    ) -> None:
        self.client = client
        self.on_usage = on_usage
        self.model = model
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.timeout = timeout

    async def text(self, voice: VoiceNote) -> str:
        if voice.duration is not None and voice.duration > self.max_seconds:
            raise CannotHear(TOO_LONG.format(what=f"{voice.duration} s; the limit is {self.max_seconds} s"))
        if voice.size is not None and voice.size > self.max_bytes:
            raise CannotHear(TOO_LONG.format(what=f"{voice.size // 1_000_000} MB"))
        try:
            async with asyncio.timeout(self.timeout):
                data = await voice.read()
                if len(data) > self.max_bytes:
                    raise CannotHear(TOO_LONG.format(what=f"{len(data) // 1_000_000} MB"))
                extension = voice.mime.split("/")[-1].replace("mpeg", "mp3") or "ogg"
                result = await self.client.audio.transcriptions.create(
                    model=self.model, file=(f"voice.{extension}", data, voice.mime)
                )
        except CannotHear:
            raise
        except (TimeoutError, OpenAIError, OSError) as exc:
            log.warning("transcribing a voice note failed: %s", type(exc).__name__)
            raise CannotHear(NOT_HEARD) from None
        except Exception as exc:  # the platform's download can fail in its own ways
            log.warning("fetching a voice note failed: %s: %s", type(exc).__name__, exc)
            raise CannotHear(NOT_HEARD) from None
        await self._record(result)
        heard = " ".join(str(getattr(result, "text", "") or "").split())
        if not heard:
            raise CannotHear(NOT_HEARD)
        return heard

    async def _record(self, result: object) -> None:
        """The call's usage when the provider reports it in tokens (gpt-4o-transcribe); a model
        billed by the second (whisper-1 reports `{"type": "duration"}`, or nothing) is recorded
        as a call with zero tokens: the usage table counts tokens, so its cost is not known."""
        if self.on_usage is None:
            return
        usage = getattr(result, "usage", None)
        if getattr(usage, "type", None) == "tokens":
            await self.on_usage(self.model, int(usage.input_tokens), 0, int(usage.output_tokens))  # type: ignore[union-attr]
        else:
            await self.on_usage(self.model, 0, 0, 0)


def build_transcriber(llm: LLMSettings, on_usage: UsageSink | None = None) -> Transcriber | None:
    """A transcriber when the provider speaks OpenAI's API and a transcription model is named."""
    if llm.provider not in ("openai", "openai-compatible") or not llm.transcription_model:
        return None
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.resolved_api_key() or "none", max_retries=llm.max_retries)
    return Transcriber(
        client,
        llm.transcription_model,
        max_bytes=llm.max_voice_mb * 1_000_000,
        max_seconds=llm.max_voice_seconds,
        timeout=llm.timeout_seconds,
        on_usage=on_usage,
    )
