"""What the admin API's JSON bodies are: pydantic models, shared here or declared by each route module.

Handlers build every body from its model (`reply`), and `/openapi.json` takes its schemas from the
same models (admin_api/openapi.py), so an answer and its documentation cannot drift apart.
Timestamps stay the strings the handlers make (`datetime.isoformat()`, `+00:00`): pydantic's own
datetime output would write `Z`, and clients read what they always read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from config import family
from config.family import AgeGroup, Role
from halo.http_routes import ApiModel, Error, Timestamp
from transcripts.lines import Role as LineRole

__all__ = ["ApiModel", "Count", "Error", "Member", "Number", "OpenModel", "Timestamp", "TranscriptLine", "reply"]

# a number as the service gave it: 10 stays 10 (a plain `float` would answer 10.0)
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]


class OpenModel(ApiModel):
    """A record whose further keys depend on what it is (an audit event's kind, a line's extras)."""

    model_config = ConfigDict(extra="allow")


def reply(body: BaseModel | Sequence[BaseModel], status: int = 200) -> web.Response:
    """The JSON answer, dumped from its model (or a list of them)."""
    data = body.model_dump(mode="json") if isinstance(body, BaseModel) else [b.model_dump(mode="json") for b in body]
    return web.json_response(data, status=status)


class Member(ApiModel):
    id: str
    name: str
    role: Role
    ageGroup: AgeGroup | None

    @classmethod
    def of(cls, member: family.Member) -> Member:
        return cls(id=member.id, name=member.name, role=member.role, ageGroup=member.age_group)


class TranscriptLine(OpenModel):
    """One line of a scope's transcript; further keys are what its adapter kept with it."""

    id: str
    ts: Timestamp
    scope_id: str
    role: LineRole
    speaker: str | None
    target: str | None
    platform: str | None
    text: str


Count = Annotated[int, Field(ge=0)]
