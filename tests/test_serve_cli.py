"""`halo serve` and friends as a user runs them: a real process, a real port, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FAMILY_YAML, free_port, llm_yaml
from tests.fakes.llm_server import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent


def halo_cmd(*args: str, home: Path, port: int | None = None, **popen) -> subprocess.Popen[str]:
    env = {**os.environ, "HALO_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    if port is not None:
        env["HALO_ADMIN__PORT"] = str(port)
    return subprocess.Popen(
        [sys.executable, "-m", "halo.cli", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def run_halo(*args: str, home: Path, timeout: float = 30, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HALO_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "halo.cli", *args],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
        input=stdin,
    )


def wait_healthy(port: int, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"halo exited early: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
                if json.load(resp) == {"ok": True}:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("halo did not become healthy")


OWNER = {"Authorization": "Bearer wags-token"}  # the owner's web_token in FAMILY_YAML


def post_json(url: str, payload: dict, headers: dict[str, str] | None = None, opener=None) -> dict:
    sent = {"Content-Type": "application/json", **(OWNER if headers is None else headers)}
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=sent)
    with (opener or urllib.request.build_opener()).open(req, timeout=20) as resp:
        return json.load(resp)


def login_link(proc: subprocess.Popen[str], seen: list[str]) -> str:
    """The one-time dashboard link `halo serve` prints at start (lines read go to `seen`)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if "/login?token=" in line:
            return line[line.index("http://") :].strip()
    raise AssertionError("halo serve printed no login link")


@pytest.fixture
def threaded_llm() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(default_reply="Hi from the model").start_in_thread()
    yield fake
    fake.stop()


def test_serve_chats_then_stops_cleanly_on_sigterm(tmp_path: Path, threaded_llm: FakeOpenAI):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm))
    port = free_port()
    proc = halo_cmd("serve", home=home, port=port)
    try:
        wait_healthy(port, proc)
        body = post_json(f"http://127.0.0.1:{port}/api/chat", {"text": "hello halo"})
        assert body == {"reply": "Hi from the model", "scope_id": "web:wags"}
        status_request = urllib.request.Request(f"http://127.0.0.1:{port}/status", headers=OWNER)
        with urllib.request.urlopen(status_request, timeout=5) as resp:
            status = json.load(resp)
        assert status["provider"]["name"] == "openai-compatible"
        assert status["halo_home"]["home"] == str(home)
        assert "web" in status["adapters"]
        assert "test-key" not in json.dumps(status)  # secrets masked
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "stopped" in out
    lines = [json.loads(line) for line in next((home / "transcripts").glob("*.jsonl")).read_text().splitlines()]
    pairs = [(line["role"], line["text"]) for line in lines]
    assert pairs == [("user", "hello halo"), ("assistant", "Hi from the model")]


def test_first_start_writes_a_starter_config_and_serves(tmp_path: Path):
    home = tmp_path / "fresh"
    printed: list[str] = []
    port = free_port()
    proc = halo_cmd("serve", home=home, port=port)
    try:
        wait_healthy(port, proc)
        assert (home / "halo.yaml").exists()
        assert (home / "SOUL.md").exists()
        with pytest.raises(urllib.error.HTTPError) as refused:  # no credential, even on this machine
            post_json(f"http://127.0.0.1:{port}/api/chat", {"text": "hi"}, headers={})
        assert refused.value.code == 401
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser.open(login_link(proc, printed), timeout=10) as page:  # the link, then the dashboard
            assert page.status == 200 and page.url.endswith("/") and "<title>" in page.read().decode()
        body = post_json(f"http://127.0.0.1:{port}/api/chat", {"text": "hi"}, headers={}, opener=browser)
        assert "No language model is configured" in body["reply"]
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    out = "".join(printed) + out
    assert "starter config" in out and str(home / "halo.yaml") in out


def test_bad_yaml_stops_start_up_with_a_readable_message(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + "llm:\n  provider: gpt-magic\n  colour: blue\n")
    result = run_halo("serve", home=home)
    assert result.returncode == 2
    assert str(home / "halo.yaml") in result.stderr
    assert "llm.provider" in result.stderr and "llm.colour" in result.stderr and "unknown key" in result.stderr
    assert "Traceback" not in result.stderr


def test_broken_yaml_syntax_names_the_line(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text("members:\n  - {id: mom, name: Mom\n")
    result = run_halo("serve", home=home)
    assert result.returncode == 2
    assert "not valid YAML" in result.stderr and "line" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_cedar_policy_stops_start_up_naming_the_file(tmp_path: Path):
    home = tmp_path / "home"
    (home / "policies").mkdir(parents=True)
    (home / "halo.yaml").write_text(FAMILY_YAML)
    bad_rule = "permit(principal, action, resource)\nwhen { principal.shoe_size > 3 };\n"
    (home / "policies" / "ours.cedar").write_text(bad_rule)
    result = run_halo("serve", home=home)
    assert result.returncode == 2
    assert "ours.cedar" in result.stderr
    assert "Traceback" not in result.stderr


def test_non_loopback_admin_without_token_refuses_to_start(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + "admin: {host: 0.0.0.0}\n")
    result = run_halo("serve", home=home)
    assert result.returncode == 2
    assert "admin.token" in result.stderr


def test_policy_explain_prints_decision_and_policy_ids(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML)
    allowed = run_halo("policy", "explain", "--member", "mom", "--scope", "telegram:-1001234", home=home)
    assert allowed.returncode == 0, allowed.stderr
    assert "ALLOW" in allowed.stdout.upper()
    denied = run_halo("policy", "explain", "--member", "aarav", "--scope", "telegram:-1001234", home=home)
    assert denied.returncode == 1
    assert "DENY" in denied.stdout.upper() and "parents-group-parents-only" in denied.stdout


def test_terminal_chat_goes_through_the_same_pipeline(tmp_path: Path, threaded_llm: FakeOpenAI):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm))
    threaded_llm.reply("Pasta tonight.")
    result = run_halo("chat", "--member", "mom", home=home, stdin="what's for dinner?\n/whoami\n/quit\n")
    assert result.returncode == 0, result.stderr
    assert "Pasta tonight." in result.stdout
    assert "You are Mom" in result.stdout
    lines = [json.loads(line) for f in (home / "transcripts").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert {line["scope_id"] for line in lines} == {"cli:mom"}


def test_sigterm_with_a_message_in_flight_loses_nothing(tmp_path: Path, threaded_llm: FakeOpenAI):
    import threading

    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm))
    port = free_port()
    proc = halo_cmd("serve", home=home, port=port)
    result: dict = {}
    try:
        wait_healthy(port, proc)
        threaded_llm.reply("Worth the wait.", delay=1.5)
        sender = threading.Thread(
            target=lambda: result.update(post_json(f"http://127.0.0.1:{port}/api/chat", {"text": "slow one"}))
        )
        sender.start()
        deadline = time.monotonic() + 10
        while not threaded_llm.model_requests and time.monotonic() < deadline:
            time.sleep(0.02)  # the model call has started
        proc.send_signal(signal.SIGTERM)
        sender.join(timeout=20)
    finally:
        _, err = proc.communicate(timeout=20)
    assert result == {"reply": "Worth the wait.", "scope_id": "web:wags"}, err
    assert proc.returncode == 0
    lines = [json.loads(line) for line in next((home / "transcripts").glob("*.jsonl")).read_text().splitlines()]
    assert [line["role"] for line in lines] == ["user", "assistant"]
