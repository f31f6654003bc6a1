"""What a serving process does not hold: httpx's command-line client (halo/runtime/heap.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # an interpreter per case

ROOT = Path(__file__).resolve().parent.parent
CLI_LIBRARIES = ["rich", "pygments"]

PROBE = """
import json, sys
if sys.argv[1] == "skip":
    from halo.runtime.heap import skip_httpx_cli
    skip_httpx_cli()
import httpx
client = httpx.AsyncClient()  # what python-telegram-bot makes
print(json.dumps({"loaded": [m for m in LIBRARIES if m in sys.modules], "stub_main": callable(httpx.main)}))
"""


def probe(mode: str) -> dict:
    code = PROBE.replace("LIBRARIES", repr(CLI_LIBRARIES))
    out = subprocess.run([sys.executable, "-c", code, mode], cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_httpx_without_its_command_line_client_loads_neither_rich_nor_pygments() -> None:
    if probe("plain")["loaded"] != CLI_LIBRARIES:
        pytest.skip("rich and pygments are not both installed: httpx's CLI loads nothing to skip")
    assert probe("skip") == {"loaded": [], "stub_main": True}
