"""A cheap token estimate and the budget cut made with it, for history and context alike."""

from __future__ import annotations

import json
from typing import Any


def estimate_tokens(item: Any) -> int:
    """About four characters a token: cheap, provider-neutral, good enough for a budget."""
    return max(1, len(json.dumps(item, ensure_ascii=False, default=str)) // 4)


def starts_turn(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") in ("user", "system")


def fit_count(items: list[Any], budget: int, costs: list[int] | None = None) -> int:
    """How many of the newest items fit in `budget` tokens, starting on a turn boundary so that
    a tool call is never separated from its output."""
    total, start = 0, len(items)
    for i in range(len(items) - 1, -1, -1):
        total += costs[i] if costs is not None else estimate_tokens(items[i])
        if total > budget:
            break
        start = i
    while start < len(items) and not starts_turn(items[start]):
        start += 1
    return len(items) - start


def fit_to_budget(items: list[Any], budget: int) -> list[Any]:
    """The newest items that fit in `budget` tokens (see `fit_count`)."""
    n = fit_count(items, budget)
    return items[len(items) - n :] if n else []
