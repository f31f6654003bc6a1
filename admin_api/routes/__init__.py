"""The admin API's route table: one line per endpoint, with who may call it.

`create_app` registers exactly these, and `/openapi.json` documents exactly these (a test
holds the two together).
"""

from __future__ import annotations

from dataclasses import dataclass

from admin_api.base import Handler
from admin_api.guards import Access


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    access: Access
    on_unauthorized: Handler | None = None  # a different answer for a refused caller


def admin_routes() -> list[Route]:
    from admin_api.routes import (
        backups,
        dashboard,
        events,
        family,
        files,
        health,
        home,
        login,
        memory,
        pairing,
        policy,
        sessions,
        tasks,
    )

    return [
        *health.ROUTES,
        *sessions.ROUTES,
        *policy.ROUTES,
        *events.ROUTES,
        *memory.ROUTES,
        *files.ROUTES,
        *pairing.ROUTES,
        *family.ROUTES,
        *tasks.ROUTES,
        *dashboard.ROUTES,
        *home.ROUTES,
        *login.ROUTES,
        *backups.ROUTES,
    ]
