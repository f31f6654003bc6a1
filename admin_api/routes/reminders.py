"""Reminders and lists, as the dashboard's Reminders & lists panel shows them (a parent sees
everything; a member sees their own through the chat: /reminders, /list)."""

from __future__ import annotations

import re

from aiohttp import web
from pydantic import Field

from admin_api.base import ApiError, household_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, Timestamp, reply
from admin_api.routes import Reply, Route, param
from halo.lists.store import ListStore
from halo.reminders.store import ReminderStore

_ID = re.compile(r"[1-9]\d{0,11}")


class Reminder(ApiModel):
    id: int = Field(ge=1)
    setBy: str = Field(description="the member who set it", examples=["mom"])
    target: str = Field(description="the member reminded, or `parents`", examples=["aarav"])
    text: str
    scopeId: str = Field(description="where it was set")
    createdAt: Timestamp
    dueAt: Timestamp = Field(description="when it goes next (quiet hours may have moved it: `held`)")
    every: str | None = Field(description="a recurring reminder's rule: cron days and time, e.g. `mon-fri 07:30`")
    urgent: bool
    held: bool
    state: str = Field(description="pending | done | cancelled | missed")
    fired: int
    lastFiredAt: Timestamp | None


class ListItem(ApiModel):
    id: int
    scopeId: str = Field(description="the chat the list belongs to")
    list: str = Field(description="the list's name (`list` is a chat's default list)")
    text: str
    done: bool
    addedBy: str | None
    addedAt: Timestamp


def _reminders(request: web.Request) -> ReminderStore:
    reminders = household_desk(request).reminders
    if reminders is None:
        raise ApiError(404, "reminders are not set up in this halo")
    return reminders.store


async def list_reminders(request: web.Request) -> web.Response:
    """Every reminder, soonest first; `?state=` narrows it."""
    state = request.query.get("state")
    if state is not None and state not in ("pending", "done", "cancelled", "missed"):
        raise ApiError(400, "state is one of pending, done, cancelled, missed")
    found = await _reminders(request).list(state=state)  # type: ignore[arg-type]
    return reply([Reminder.model_validate(r.as_json()) for r in found])


async def cancel_reminder(request: web.Request) -> web.Response:
    raw = request.match_info["id"]
    if not _ID.fullmatch(raw):
        raise ApiError(400, "id must be a reminder's id, a whole number from 1")
    store = _reminders(request)
    halo = household_desk(request)
    if await store.cancel(int(raw)):
        halo.audit.write("reminder_cancelled", reminder_id=int(raw), actor=actor(request))
        if halo.reminder_clock is not None:
            halo.reminder_clock.wake()
    found = await store.get(int(raw))
    if found is None:
        raise ApiError(404, f"there is no reminder {raw}")
    return reply(Reminder.model_validate(found.as_json()))


async def list_lists(request: web.Request) -> web.Response:
    """Every list item of every chat, by chat, list and order."""
    lists: ListStore | None = household_desk(request).lists
    items = await lists.everything() if lists is not None else []
    return reply([ListItem.model_validate(i.as_json()) for i in items])


ROUTES = [
    Route(
        "GET",
        "/reminders",
        list_reminders,
        "token",
        summary="Every reminder, soonest first",
        responses={200: Reply("reminders", list[Reminder]), 400: "`state` is not a reminder state"},
        parameters=[param("state", "query", {"type": "string", "enum": ["pending", "done", "cancelled", "missed"]})],
        tag="reminders",
    ),
    Route(
        "DELETE",
        "/reminders/{id}",
        cancel_reminder,
        "token",
        summary="Cancel a reminder (audited); one that already went or was cancelled is answered as it is",
        responses={
            200: Reply("the reminder, now cancelled unless it had gone already", Reminder),
            400: "The id is not a whole number",
            404: "No reminder has this id",
        },
        parameters=[param("id", "path", {"type": "string", "pattern": "^[1-9][0-9]{0,11}$"}, example="1")],
        tag="reminders",
    ),
    Route(
        "GET",
        "/lists",
        list_lists,
        "token",
        summary="Every chat's lists, item by item",
        responses={200: Reply("list items", list[ListItem])},
        tag="reminders",
    ),
]
