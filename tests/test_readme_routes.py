"""The README's endpoint table names every route the server has: it drifted once already."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

from adapters.web import WebChatAdapter
from admin_api.openapi import build_spec

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_route_is_in_the_readme_table() -> None:
    rows = [line for line in README.read_text().splitlines() if line.startswith("| `")]
    web_chat = WebChatAdapter(cast(Any, None), cast(Any, None), cast(Any, None)).routes()  # its records only
    paths = build_spec(web_chat)["paths"]  # the admin route table and the web chat, as /openapi.json has them
    routes = [(method.upper(), path) for path, operations in paths.items() for method in operations]
    assert len(routes) > 30
    missing = [
        f"{method} {path}"
        for method, path in routes
        if not any(re.match(rf"\| `{method} {re.escape(path)}[`?]", row) for row in rows)
    ]
    assert missing == [], "add these to the endpoint table in README.md"
