"""`halo serve` starts in seconds (issue 23): its port opens before the Agents SDK is loaded,
`/healthz` answers while it loads, a message sent meanwhile is answered once it has, and
platform libraries nobody configured are never imported.

The SDK's import is held shut in the served process by a gate on `import agents` (a FIFO the
test opens), so "while it loads" is a fact of the test, not a race against the clock.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests import processes
from tests.conftest import FAMILY_YAML, free_port, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.test_serve_cli import OWNER, STARTUP, threaded_llm, wait_healthy

pytestmark = pytest.mark.slow  # halo serve as a process

__all__ = ["threaded_llm"]  # the fixture, shared with test_serve_cli

ROOT = Path(__file__).resolve().parent.parent
NOT_CONFIGURED = ["discord", "aiomqtt", "pypdf", "graphiti_core"]
# With no embedder, recall is full-text and nothing compares vectors: NumPy (~11 MiB) stays out.
FULL_TEXT = "memory:\n  semantic: {embedder: none}\n"
# halo uses SQLAlchemy Core only: on SQLite its ORM (~6 MiB, loaded by the asyncio extension's
# package) stays out (halo/storage/sqlite.py). PostgreSQL's engine is the extension's own.
ORM = ["sqlalchemy.orm", "sqlalchemy.ext.asyncio"]
NOT_NEEDED = [*NOT_CONFIGURED, "numpy", *ORM]


def not_needed_here() -> list[str]:
    """NOT_NEEDED on this run's store (HALO_TEST_STORAGE=postgres sets HALO_STORAGE__URL)."""
    on_postgresql = bool(os.environ.get("HALO_STORAGE__URL"))
    return [name for name in NOT_NEEDED if not (on_postgresql and name in ORM)]


# `halo serve`, with `import agents` held until something is written to the FIFO HALO_TEST_GATE,
# and the names in sys.modules written to HALO_TEST_MODULES when the process exits.
GATED_SERVE = """
import atexit, json, os, runpy, sys

class Gate:
    def find_spec(self, name, path=None, target=None):
        if name == "agents":
            sys.meta_path.remove(self)
            with open(os.environ["HALO_TEST_GATE"]) as gate:
                gate.read()
        return None

sys.meta_path.insert(0, Gate())
atexit.register(lambda: open(os.environ["HALO_TEST_MODULES"], "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["halo", "serve"]
runpy.run_module("halo.runtime.cli", run_name="__main__")
"""


def healthz(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as resp:
        return json.load(resp)


def gated_serve(tmp_path: Path, home: Path, port: int) -> tuple[subprocess.Popen[str], Path, Path]:
    """`halo serve` on `port` whose `import agents` waits for the FIFO (returned, with the
    file the loaded module names are written to at exit)."""
    gate, modules = tmp_path / "gate", tmp_path / "modules.json"
    os.mkfifo(gate)
    env = {
        **os.environ,
        "HALO_HOME": str(home),
        "HALO_ADMIN__PORT": str(port),
        "HALO_TEST_GATE": str(gate),
        "HALO_TEST_MODULES": str(modules),
    }
    proc = processes.popen(
        [sys.executable, "-c", GATED_SERVE],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return proc, gate, modules


def test_healthz_answers_while_the_sdk_loads_and_a_message_sent_then_is_answered(
    tmp_path: Path, threaded_llm: FakeOpenAI
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm) + FULL_TEXT)
    port = free_port()
    proc, gate, modules = gated_serve(tmp_path, home, port)
    try:
        wait_healthy(port, proc)
        loading = healthz(port)
        assert loading["starting"] is True  # the SDK's import is still held at the gate
        chat = http.client.HTTPConnection("127.0.0.1", port, timeout=STARTUP)
        body = json.dumps({"text": "hello while you load"})
        chat.request("POST", "/api/chat", body, {"Content-Type": "application/json", **OWNER})  # sent, whole
        with gate.open("w") as opening:
            opening.write("go")
        answer = chat.getresponse()
        assert answer.status == 200
        assert json.load(answer) == {"reply": "Hi from the model", "scope_id": "web:wags"}
        assert healthz(port)["starting"] is False
        assert healthz(port)["home"] == loading["home"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=STARTUP)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    loaded = set(json.loads(modules.read_text()))
    assert "agents" in loaded  # the probe saw the whole run
    assert [name for name in not_needed_here() if name in loaded] == []


def test_a_sigterm_while_loading_starts_nothing_and_a_waiting_message_is_told(
    tmp_path: Path, threaded_llm: FakeOpenAI
) -> None:
    """SIGTERM before halo is built: serve builds and starts nothing (no adapter, no catch-up,
    no turn), tells a request that was waiting, and exits cleanly."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm))
    port = free_port()
    proc, gate, _ = gated_serve(tmp_path, home, port)
    try:
        wait_healthy(port, proc)
        assert healthz(port)["starting"] is True
        chat = http.client.HTTPConnection("127.0.0.1", port, timeout=STARTUP)
        body = json.dumps({"text": "hello while you load"})
        chat.request("POST", "/api/chat", body, {"Content-Type": "application/json", **OWNER})
        proc.send_signal(signal.SIGTERM)  # the SDK's import is still held: serve is loading
        with gate.open("w") as opening:
            opening.write("go")
        answer = chat.getresponse()
        assert answer.status == 503
        assert json.load(answer) == {"error": "halo is stopping"}
        out, err = proc.communicate(timeout=STARTUP)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "halo: stopped before it started" in out and "halo is running" not in out
    assert not (home / "halo.db").exists(), "halo was never built"
    assert not (home / "transcripts").exists() or not any((home / "transcripts").iterdir())
    assert threaded_llm.requests == []
