"""The work task list, as the dashboard's Tasks panel shows it."""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from admin_api.base import ApiError, household_desk
from admin_api.models import ApiModel, Timestamp, reply
from admin_api.routes import Reply, Route, param
from halo.work.tasks import STATUSES, Event, Status

MAX_PROJECT_PARAM = 80


class TaskNote(ApiModel):
    at: Timestamp
    event: Event
    text: str = Field(description="a note, why it is blocked, or a done note")
    by: str | None


class Task(ApiModel):
    number: int = Field(ge=1, description="what /task start N and friends name")
    project: str = Field(examples=["ContextForge"])
    title: str
    status: Status
    owner: str | None = Field(description="who added or started it")
    scopeId: str = Field(description="the work channel it belongs to", examples=["discord:3001"])
    createdAt: Timestamp
    updatedAt: Timestamp
    notes: list[TaskNote] = Field(description="the task's log, oldest first")


async def list_tasks(request: web.Request) -> web.Response:
    """Every task, by number; `?project=` and `?status=` narrow it."""
    project = request.query.get("project") or None
    status = request.query.get("status")
    if project is not None and len(project) > MAX_PROJECT_PARAM:
        raise ApiError(400, f"project is at most {MAX_PROJECT_PARAM} characters")
    if status is not None and status not in STATUSES:
        raise ApiError(400, f"status is one of {', '.join(STATUSES)}")
    store = household_desk(request).tasks
    tasks = await store.list(project=project) if store is not None else []
    return reply([Task.model_validate(t.as_json()) for t in tasks if status is None or t.status == status])


ROUTES = [
    Route(
        "GET",
        "/tasks",
        list_tasks,
        "token",
        summary="The work task list, by number",
        responses={
            200: Reply("tasks with their logs", list[Task]),
            400: "`status` is not a task status, or `project` is too long",
        },
        parameters=[
            param(
                "project", "query", {"type": "string", "maxLength": MAX_PROJECT_PARAM}, "only this project (any case)"
            ),
            param("status", "query", {"type": "string", "enum": list(STATUSES)}),
        ],
        tag="tasks",
    )
]
