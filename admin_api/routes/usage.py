"""What halo's model calls cost: `GET /usage`, for the dashboard's spend chart and for parents."""

from __future__ import annotations

from datetime import date, timedelta

from aiohttp import web

from admin_api.base import ApiError, household_desk
from admin_api.routes import Reply, Route, param
from halo.usage.prices import Prices
from halo.usage.report import usage_report
from halo.usage.store import GROUPINGS

MAX_DAYS = 366


def _day(text: str | None, default: date, name: str) -> date:
    if text is None:
        return default
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ApiError(400, f"{name} is a day, YYYY-MM-DD") from None


def _days_before(day: date, days: int) -> date:
    return day - timedelta(days=days) if day - date.min >= timedelta(days=days) else date.min


async def get_usage(request: web.Request) -> web.Response:
    """Tokens and USD per day, grouped `by` member, scope, model, purpose or level (default: member)."""
    halo = household_desk(request)
    settings = halo.config.current  # llm.prices and budget apply live
    today = date.fromisoformat(halo.usage.today())
    last = _day(request.query.get("to"), today, "to")
    first = _day(request.query.get("from"), _days_before(last, 13), "from")
    by = request.query.get("by", "member")
    if by not in GROUPINGS:
        raise ApiError(400, f"by is one of {', '.join(GROUPINGS)}")
    first = max(first, _days_before(last, MAX_DAYS - 1))  # a longer range reads its last MAX_DAYS days
    report = await usage_report(halo.usage.store, Prices(settings.llm.prices), first.isoformat(), last.isoformat(), by)  # type: ignore[arg-type]
    budget = settings.budget
    report["budget"] = {"dailyUsd": budget.daily_usd, "memberDailyUsd": budget.member_daily_usd}
    return web.json_response(report)


DAY = {"type": "string", "format": "date"}
ROUTES = [
    Route(
        "GET",
        "/usage",
        get_usage,
        "token",
        summary="What the model calls cost, per day and per member, scope, model, purpose or level",
        responses={
            200: Reply("rows of tokens and USD (null cost: a model with no known price, named in unknownPrice)"),
            400: "a day is not YYYY-MM-DD or `by` is unknown",
        },
        parameters=[
            param(
                "from",
                "query",
                DAY,
                f"first day (family timezone); default: 13 days before `to`; at most {MAX_DAYS} days before it",
            ),
            param("to", "query", DAY, "last day, inclusive; default: today"),
            param("by", "query", {"type": "string", "enum": list(GROUPINGS), "default": "member"}),
        ],
        tag="usage",
    )
]
