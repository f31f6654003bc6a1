"""`halo serve` and friends as a user runs them.

One test runs `halo serve` as a real process on a real port and stops it with a real
signal, with a message in flight. Everything else (start-up refusals, `policy explain`,
`halo chat`, the first start) runs `halo.cli.main` in this process: the same code path, without
paying for a fresh interpreter and the Agents SDK import on every test.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from halo.runtime.cli import main
from tests import processes
from tests.conftest import FAMILY_YAML, free_port, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import home_memory
from tests.transcript_support import every_line

ROOT = Path(__file__).resolve().parent.parent
STARTUP = 120.0  # generous: a loaded 2-core machine; a healthy server answers at once


def halo_cmd(
    *args: str, home: Path, port: int | None = None, env: dict[str, str] | None = None, **popen
) -> subprocess.Popen[str]:
    env = {**(env or os.environ), "HALO_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    if port is not None:
        env["HALO_ADMIN__PORT"] = str(port)
    return processes.popen(
        [sys.executable, "-m", "halo.runtime.cli", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def wait_healthy(port: int, proc: subprocess.Popen[str], timeout: float = STARTUP) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"halo exited early: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
                if json.load(resp)["ok"] is True:
                    return
        except OSError:
            time.sleep(0.1)  # polling a port that is not open yet; there is no event to wait on
    raise AssertionError(f"halo did not become healthy within {timeout}s")


OWNER = {"Authorization": "Bearer wags-token"}  # the owner's web_token in FAMILY_YAML: no credential, no chat


def post_json(url: str, payload: dict) -> dict:
    headers = {"Content-Type": "application/json", **OWNER}
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def halo(
    *argv: str, home: Path, capsys: pytest.CaptureFixture[str], stdin: str = "", monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    """`halo <argv>` in this process: exit code, stdout, stderr."""
    monkeypatch.setenv("HALO_HOME", str(home))
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def threaded_llm() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(default_reply="Hi from the model").start_in_thread()
    yield fake
    fake.stop()


def transcript_lines(home: Path) -> list[dict]:
    return asyncio.run(every_line(home))


@pytest.mark.slow  # starts a process
def test_serve_chats_and_a_sigterm_with_a_message_in_flight_loses_nothing(tmp_path: Path, threaded_llm: FakeOpenAI):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm))
    port = free_port()
    proc = halo_cmd("serve", home=home, port=port)
    result: dict = {}
    try:
        wait_healthy(port, proc)
        body = post_json(f"http://127.0.0.1:{port}/api/chat", {"text": "hello halo"})
        assert body == {"reply": "Hi from the model", "scope_id": "web:wags"}
        status_request = urllib.request.Request(f"http://127.0.0.1:{port}/status", headers=OWNER)
        with urllib.request.urlopen(status_request, timeout=30) as resp:
            status = json.load(resp)
        assert status["provider"]["name"] == "openai-compatible"
        assert status["halo_home"]["home"] == str(home)
        assert "web" in status["adapters"]
        assert "test-key" not in json.dumps(status)  # secrets masked

        threaded_llm.reply("Worth the wait.", delay=1.5)
        asked = len(threaded_llm.model_requests)
        sender = threading.Thread(
            target=lambda: result.update(post_json(f"http://127.0.0.1:{port}/api/chat", {"text": "slow one"}))
        )
        sender.start()
        deadline = time.monotonic() + STARTUP
        while len(threaded_llm.model_requests) == asked and time.monotonic() < deadline:
            time.sleep(0.02)  # the fake server runs in another thread: poll until the model call has started
        assert len(threaded_llm.model_requests) > asked, "the slow message never reached the model"
        proc.send_signal(signal.SIGTERM)
        sender.join(timeout=STARTUP)
    finally:
        if proc.poll() is None and not result:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=STARTUP)
    assert result == {"reply": "Worth the wait.", "scope_id": "web:wags"}, err
    assert proc.returncode == 0, err
    assert "stopped" in out
    pairs = [(line["role"], line["text"]) for line in transcript_lines(home)]
    assert pairs == [
        ("user", "hello halo"),
        ("assistant", "Hi from the model"),
        ("user", "slow one"),
        ("assistant", "Worth the wait."),
    ]


def test_first_start_writes_a_starter_config_and_answers(tmp_path: Path, capsys, monkeypatch):
    home = tmp_path / "fresh"
    code, out, err = halo("chat", home=home, stdin="hi\n/quit\n", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert (home / "halo.yaml").exists()
    assert asyncio.run(home_memory(home, "SOUL.md")), "a default persona, kept where the memory is"
    assert "starter config" in out and str(home / "halo.yaml") in out
    assert "No language model is configured" in out


def test_bad_yaml_stops_start_up_with_a_readable_message(tmp_path: Path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + "llm:\n  provider: gpt-magic\n  colour: blue\n")
    code, _, err = halo("serve", home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert str(home / "halo.yaml") in err
    assert "llm.provider" in err and "llm.colour" in err and "unknown key" in err
    assert "Traceback" not in err


def test_broken_yaml_syntax_names_the_line(tmp_path: Path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text("members:\n  - {id: mom, name: Mom\n")
    code, _, err = halo("serve", home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert "not valid YAML" in err and "line" in err
    assert "Traceback" not in err


def test_bad_cedar_policy_stops_start_up_naming_the_file(tmp_path: Path, capsys, monkeypatch):
    home = tmp_path / "home"
    (home / "policies").mkdir(parents=True)
    (home / "halo.yaml").write_text(FAMILY_YAML)
    bad_rule = "permit(principal, action, resource)\nwhen { principal.shoe_size > 3 };\n"
    (home / "policies" / "ours.cedar").write_text(bad_rule)
    # the policy is checked while halo is built, before anything listens: `chat` and `serve` share it
    code, _, err = halo("chat", home=home, stdin="/quit\n", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert "ours.cedar" in err
    assert "Traceback" not in err


def test_non_loopback_admin_without_token_refuses_to_start(tmp_path: Path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + "admin: {host: 0.0.0.0}\n")
    code, _, err = halo("serve", home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert "admin.token" in err


def test_policy_explain_prints_decision_and_policy_ids(tmp_path: Path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML)
    code, out, err = halo(
        "policy",
        "explain",
        "--member",
        "mom",
        "--scope",
        "telegram:-1001234",
        home=home,
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    assert code == 0, err
    assert "ALLOW" in out.upper()
    code, out, _ = halo(
        "policy",
        "explain",
        "--member",
        "aarav",
        "--scope",
        "telegram:-1001234",
        home=home,
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    assert code == 1
    assert "DENY" in out.upper() and "parents-group-parents-only" in out


def test_terminal_chat_goes_through_the_same_pipeline(tmp_path: Path, threaded_llm: FakeOpenAI, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm))
    threaded_llm.reply("Pasta tonight.")
    code, out, err = halo(
        "chat",
        "--member",
        "mom",
        home=home,
        stdin="what's for dinner?\n/whoami\n/quit\n",
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    assert code == 0, err
    assert "Pasta tonight." in out
    assert "You are Mom" in out
    assert {line["scope_id"] for line in transcript_lines(home)} == {"cli:mom"}


@pytest.mark.slow  # starts a process
def test_chat_at_end_of_input_ends_cleanly(tmp_path: Path, threaded_llm: FakeOpenAI):
    """Input that ends (a pipe, ^D) is a normal end. Whether the first index sync is still waiting
    on the embedder then is up to timing; tests/test_semantic_schedule.py holds it there."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML + llm_yaml(threaded_llm))
    offline = {**os.environ, "HF_ENDPOINT": "http://hub.invalid"}
    proc = halo_cmd("chat", home=home, stdin=subprocess.DEVNULL, env=offline)
    out, err = proc.communicate(timeout=STARTUP)
    assert proc.returncode == 0, err
    assert "halo chat as" in out
    assert "Traceback" not in err and "CancelledError" not in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--action", "fly"], "converse"),  # the valid actions are listed
        (["--scope", "nowhere:1"], "nowhere:1"),
    ],
    ids=["unknown-action", "unknown-scope"],
)
def test_policy_explain_with_a_wrong_argument_says_what_is_wrong(tmp_path: Path, capsys, monkeypatch, argv, says):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML)
    args = {"--member": "mom", "--scope": "telegram:-1001234", **dict(zip(argv[::2], argv[1::2], strict=True))}
    flat = [part for pair in args.items() for part in pair]
    code, _, err = halo("policy", "explain", *flat, home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert says in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["distill", "nosuchscope"], "'nosuchscope' is not a scope id"),
        (["import", "missing.tar"], "no archive at missing.tar"),
        (["export", "/nonexistent/dir/x"], "no folder /nonexistent/dir"),
        (["policy", "explain", "--member", "nobody", "--scope", "web:mom"], "no member 'nobody'; members: wags"),
        (["policy", "explain", "--scope", "web:mom", "--about", "nobody", "--action", "read_memory"], "'nobody'"),
        (["chat", "--member", "nobody"], "no member 'nobody'"),
    ],
    ids=["distill-not-a-scope", "import-missing", "export-no-folder", "explain-no-member", "explain-about", "chat"],
)
def test_a_command_with_a_bad_argument_says_what_is_wrong(tmp_path: Path, capsys, monkeypatch, argv, says):
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML)
    code, _, err = halo(*argv, home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert (code, "Traceback" in err) == (2, False), err
    assert says in err
    assert not Path("/nonexistent").exists(), "a mistyped path makes no folders"


def test_policy_explain_asks_about_the_owner_by_default(tmp_path: Path, capsys, monkeypatch):
    """The README's example runs on the starter config, whose one member is the person who started it."""
    home = tmp_path / "fresh"
    code, _, _ = halo("chat", home=home, stdin="/quit\n", capsys=capsys, monkeypatch=monkeypatch)  # the starter
    assert code == 0
    code, out, err = halo(
        "policy", "explain", "--scope", "telegram:-1001234", "--action", "converse",
        home=home, capsys=capsys, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert code == 1, err
    assert out.startswith("DENY: ") and "group-untrusted" in out


@pytest.mark.parametrize(("setting", "code"), [("false", 1), ("true", 0)])
def test_policy_explain_remind_answers_with_the_reminder_setting(tmp_path: Path, capsys, monkeypatch, setting, code):
    """A child reminding a parent: `halo policy explain` asks the policy what the running halo
    would, reminders.children_may_remind_parents included."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML)
    monkeypatch.setenv("HALO_REMINDERS__CHILDREN_MAY_REMIND_PARENTS", setting)
    argv = ["--action", "remind", "--member", "aarav", "--scope", "web:aarav", "--about", "mom"]
    got, out, err = halo("policy", "explain", *argv, home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert got == code, (out, err)
    assert ("ALLOW" if code == 0 else "DENY") in out.upper()
