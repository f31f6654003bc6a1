"""The README's endpoint table names every route the server has: it drifted once already."""

from __future__ import annotations

import re
from pathlib import Path

from adapters.web import openapi_paths as web_chat_paths
from admin_api.openapi import build_spec

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_route_is_in_the_readme_table() -> None:
    rows = [line for line in README.read_text().splitlines() if line.startswith("| `")]
    paths = build_spec(web_chat_paths())["paths"]  # the admin route table and the web chat
    routes = [(method.upper(), path) for path, operations in paths.items() for method in operations]
    assert len(routes) > 30
    missing = [
        f"{method} {path}"
        for method, path in routes
        if not any(re.match(rf"\| `{method} {re.escape(path)}[`?]", row) for row in rows)
    ]
    assert missing == [], "add these to the endpoint table in README.md"
