"""Usage figures for people: tokens and USD per day and per member, scope, model, purpose or level."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from halo.usage.prices import Prices
from halo.usage.store import GroupBy, UsageStore


async def usage_report(store: UsageStore, prices: Prices, first_day: str, last_day: str, by: GroupBy) -> dict[str, Any]:
    """`rows`: one per day and group key with tokens and cost (None when a model's price is
    unknown, and `unknownPrice` names those models); `total` sums the known costs."""
    rows: dict[tuple[str, str | None], dict[str, Any]] = defaultdict(
        lambda: {"calls": 0, "inputTokens": 0, "cachedTokens": 0, "outputTokens": 0, "usd": 0.0, "complete": True}
    )
    unknown: set[str] = set()
    for t in await store.totals(first_day, last_day, by):
        row = rows[(t.day, t.key)]
        row["calls"] += t.calls
        row["inputTokens"] += t.input_tokens
        row["cachedTokens"] += t.cached_tokens
        row["outputTokens"] += t.output_tokens
        cost = prices.cost(t.model, t.input_tokens, t.cached_tokens, t.output_tokens)
        if cost is None:
            unknown.add(t.model)
            row["complete"] = False
        else:
            row["usd"] += cost
    found = [
        {"day": day, "key": key, **{k: (round(v, 6) if k == "usd" else v) for k, v in row.items()}}
        for (day, key), row in sorted(rows.items(), key=lambda item: (item[0][0], item[0][1] or ""))
    ]
    inputs = sum(r["inputTokens"] for r in found)
    return {
        "from": first_day,
        "to": last_day,
        "by": by,
        "rows": found,
        "totalUsd": round(sum(r["usd"] for r in found), 6),
        "cachedShare": round(sum(r["cachedTokens"] for r in found) / inputs, 4) if inputs else 0.0,
        "unknownPrice": sorted(unknown),
    }
