"""Intake: what came with a message made into the turn's input, before safety, memory and the
model see it. A voice note is heard, a photo shown to the model, a document read into the
scope's files; what cannot be taken in is said plainly, in code, with no model turn."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from halo.core.turn import Turn
from halo.media.images import NO_VISION, CannotSee
from halo.media.voice import NOT_SET_UP, CannotHear
from transcripts.lines import Received

if TYPE_CHECKING:
    from halo.media.documents import Documents
    from halo.media.images import PhotoReader
    from halo.media.voice import Transcriber


@dataclass(frozen=True, slots=True)
class Taken:
    """The turn with its attachment taken in; `refusal`: why something could not be (the reply);
    `marks`: what the message's transcript line says about it (`heard`, `photo`, `document`).
    Each step of intake returns the next one (`dataclasses.replace`)."""

    turn: Turn
    refusal: str | None = None
    marks: Received = field(default_factory=Received)

    @property
    def line_text(self) -> str:
        """The message's transcript text: a photo or a voice note with no words is still a line."""
        return self.turn.envelope.text or ("(photo)" if self.marks.photo is not None else "(voice note)")


class Intake:
    """Voice notes (halo/media/voice.py), photos (images.py) and documents (documents.py); each
    part None when it is not set up."""

    def __init__(
        self,
        transcriber: Transcriber | None = None,
        photos: PhotoReader | None = None,
        documents: Documents | None = None,
    ) -> None:
        self.transcriber = transcriber
        self.photos = photos
        self.documents = documents

    async def take_in(self, turn: Turn) -> Taken:
        """A voice note or a photo only when halo was addressed; a document always (it is kept in
        the scope's files even when the message was not for halo)."""
        env = turn.envelope
        taken = Taken(turn)
        if env.voice is not None and env.addressed:
            heard_turn, refusal = await self._hear(turn)
            heard = refusal is None
            taken = Taken(
                heard_turn, refusal, replace(taken.marks, heard=heard, voice=None if heard else "not transcribed")
            )
        attachment = taken.turn.envelope.attachment
        if attachment is not None and attachment.kind == "image" and env.addressed:
            shown, cannot_see = await self._look(taken.turn)
            photo = "shown" if cannot_see is None else "not shown"
            taken = Taken(shown, taken.refusal or cannot_see, replace(taken.marks, photo=photo))
        elif attachment is not None and attachment.kind == "document" and self.documents is not None:
            received, not_read = await self.documents.receive(taken.turn)
            marks = taken.marks if not_read is None else replace(taken.marks, document="not read")
            taken = Taken(received, taken.refusal or not_read, marks)
        return taken

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

    async def _look(self, turn: Turn) -> tuple[Turn, str | None]:
        """The turn with its photo shown to the model (`turn.images`), or why it cannot be."""
        photo = turn.envelope.attachment
        assert photo is not None
        if self.photos is None:
            return turn, NO_VISION
        try:
            picture = (await self.photos.picture(photo)).content_part()
        except CannotSee as exc:
            return turn, str(exc)
        return replace(turn, images=(*turn.images, picture)), None


def model_input(turn: Turn) -> str:
    """The model's view of the message. In a group several people talk: the model needs to know
    who said what; a voice note is marked as heard, not typed, and a photo as a photo (the
    picture itself goes with the turn it came in, as image input: later turns see this line)."""
    env = turn.envelope
    text = f"(voice note) {env.text}" if env.heard else env.text
    if env.attachment is not None and env.attachment.kind == "image":
        text = f"(photo) {text}".rstrip()
    if env.scope.type == "dm":
        return text
    name = env.speaker.member.name if env.speaker.member else env.speaker.label
    return f"[{name}] {text}"
