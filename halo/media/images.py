"""Photos become image input for the model (the Agents SDK's `input_image` content part), with
the caption as text. The picture itself is not kept: the transcript says a photo came, and the
model's later turns see that line, not the picture again (which also keeps a photo's token
cost to the turn it arrived in; `llm.image_detail` caps that cost).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from dataclasses import dataclass

from config.settings import LLMSettings
from halo.core.envelope import Attachment

log = logging.getLogger(__name__)

NO_VISION = (
    "I got your photo, but I can't look at pictures with the model I use here (llm.vision is off). "
    "Could you tell me what it shows? Your message is kept."
)
TOO_BIG = "That photo is too big for me ({size} MB; the limit is {limit} MB). Could you send a smaller one?"
NOT_SEEN = "I couldn't fetch that photo just now. Could you send it again? Your message is kept."
MODEL_CANNOT_SEE = (
    "The model I use here could not take that photo (it may not see pictures: set llm.vision to false "
    "to have me say so straight away). Could you tell me what it shows? Your message is kept."
)


class CannotSee(Exception):
    """The photo is not shown to the model; the message says why, for the person."""


@dataclass(frozen=True, slots=True)
class Picture:
    """A photo ready for the model: a data URL, so no provider needs to fetch anything."""

    data_url: str
    detail: str
    size: int

    def content_part(self) -> dict[str, str]:
        return {"type": "input_image", "image_url": self.data_url, "detail": self.detail}


class PhotoReader:
    def __init__(self, *, vision: bool, max_bytes: int, detail: str, timeout: float) -> None:
        self.vision = vision
        self.max_bytes = max_bytes
        self.detail = detail
        self.timeout = timeout

    async def picture(self, photo: Attachment) -> Picture:
        if not self.vision:
            raise CannotSee(NO_VISION)
        if photo.size is not None and photo.size > self.max_bytes:
            raise CannotSee(self._too_big(photo.size))
        try:
            async with asyncio.timeout(self.timeout):
                data = await photo.read()
        except Exception as exc:  # the platform's download can fail in its own ways
            log.warning("fetching a photo failed: %s: %s", type(exc).__name__, exc)
            raise CannotSee(NOT_SEEN) from None
        if len(data) > self.max_bytes:
            raise CannotSee(self._too_big(len(data)))
        if not data:
            raise CannotSee(NOT_SEEN)
        mime = photo.mime if photo.mime.startswith("image/") else "image/jpeg"
        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        return Picture(url, self.detail, len(data))

    def _too_big(self, size: int) -> str:
        return TOO_BIG.format(size=round(size / 1_000_000, 1), limit=self.max_bytes // 1_000_000)


def build_photo_reader(llm: LLMSettings) -> PhotoReader:
    return PhotoReader(
        vision=llm.vision and llm.provider != "none",
        max_bytes=llm.max_image_mb * 1_000_000,
        detail=llm.image_detail,
        timeout=llm.timeout_seconds,
    )
