"""What a newcomer reads, followed literally: the README's commands, halo's answer to a
database that does not exist yet (its `createdb` line, run as printed), the next steps after
a move to PostgreSQL, a YAML mistake named on its own line, and a `halo chat` whose terminal
holds the conversation and nothing else. halo runs as the user runs it: its CLI, mostly as a
real process."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from config.loader import read_yaml
from halo.storage.refusal import createdb_command
from tests.conftest import FAMILY_YAML, free_port
from tests.storage_support import POSTGRES, drop_database
from tests.test_serve_cli import STARTUP, halo, halo_cmd, post_json, wait_healthy

ROOT = Path(__file__).resolve().parent.parent
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) ", re.MULTILINE)
SHELLS = ("sh", "bash", "shell", "console")


def plain_environment() -> dict[str, str]:
    """This machine's environment without HALO_* (the test says where halo lives) and offline
    for the embedder download."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HALO_")}
    return {**env, "HF_ENDPOINT": "http://hub.invalid"}


# --- the README ---------------------------------------------------------------------------


def commands_in(markdown: str) -> list[str]:
    """Every command a shell block of the README runs (one per `&&`, `;` or `|` part), without
    its comment and its leading VAR=value assignments."""
    found = []
    for block in shell_blocks(markdown):
        for line in block:
            line = line.split(" #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            for part in re.split(r"&&|;|\|", line):
                words = part.split()
                while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                    words = words[1:]
                if words:
                    found.append(" ".join(words))
    return found


def shell_blocks(markdown: str) -> list[list[str]]:
    """The lines of each fenced block marked as shell (```sh, ```bash …)."""
    blocks: list[list[str]] = []
    inside: list[str] | None = None
    for line in markdown.splitlines():
        fence = line.strip()
        if fence.startswith("```"):
            if inside is None:
                inside = []
                if fence[3:].strip() in SHELLS:
                    blocks.append(inside)
            else:
                inside = None
        elif inside is not None:
            inside.append(line)
    return blocks


def section(markdown: str, title: str) -> str:
    start = markdown.index(f"## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end != -1 else None]


def test_every_halo_command_in_the_readme_is_one_a_clone_can_run() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = commands_in(readme)
    assert any(c.startswith("uv run halo serve") for c in commands)
    bare = [c for c in commands if c.split()[0] == "halo"]
    assert not bare, f"`halo` alone is 'command not found' in a clone; write `uv run halo`: {bare}"
    postgres = section(readme, "Running on PostgreSQL")
    for inline in re.findall(r"`(halo [a-z][^`]*)`", postgres):
        assert inline.split()[1] not in ("serve", "doctor", "storage", "export", "import", "chat"), (
            f"the PostgreSQL section says `{inline}`: a command to type there is `uv run {inline}`"
        )


def test_the_readme_creates_the_database_it_then_points_halo_at() -> None:
    postgres = section((ROOT / "README.md").read_text(), "Running on PostgreSQL")
    commands = commands_in(postgres)
    url = re.search(r"url: (postgresql://\S+)", postgres)
    assert url, "the PostgreSQL section shows storage.url"
    assert createdb_command(url.group(1)) in commands, "step 1 creates the database the url names"
    order = [c.split()[0:3] for c in commands]
    assert order.index(["createdb", "-h", "127.0.0.1"]) < order.index(["uv", "run", "halo"])
    assert "Next:" in postgres, "the section shows what the move prints next, and says to do it"


# --- a YAML mistake -----------------------------------------------------------------------


def test_a_missing_brace_is_named_on_its_own_line_not_where_the_parser_noticed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    lines = FAMILY_YAML.splitlines()
    members = [i for i, line in enumerate(lines) if line.startswith("  - {id: tara")]
    assert members, "the test family has Tara"
    lines[members[0]] = lines[members[0]].removesuffix("}")  # her `}` is missing
    filler = [f"# note {n}" for n in range(16 - members[0])]  # so that her line is line 17
    broken = [*filler, *lines[: members[0] + 1], "", "# the colleague comes next", "", "", *lines[members[0] + 1 :]]
    assert broken[16].startswith("  - {id: tara") and not broken[16].endswith("}")
    (home / "halo.yaml").write_text("\n".join(broken) + "\n")

    code, _, err = halo("serve", home=home, capsys=capsys, monkeypatch=monkeypatch)

    assert code == 2 and "Traceback" not in err
    assert f"{home / 'halo.yaml'}: line 17, column 5 is not valid YAML" in err, err
    assert "Is a `}` missing on line 17?" in err
    assert "not closed before line 22" in err  # where the parser noticed: said second, as a clue


# --- PostgreSQL, as a newcomer starts it --------------------------------------------------


def run(*argv: str, home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One `halo` command as a process, to its end."""
    proc = halo_cmd(*argv, home=home, env=env)
    out, err = proc.communicate(timeout=STARTUP)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def serve_once(home: Path, env: dict[str, str], *flags: str) -> str:
    """`halo [flags] serve` until it has answered a message (so its start, the schema's
    upgrade with it, is over), then stopped as Ctrl-C would; its stderr."""
    port = free_port()
    proc = halo_cmd(*flags, "serve", home=home, port=port, env=env)
    try:
        wait_healthy(port, proc)
        assert "You are Wags" in post_json(f"http://127.0.0.1:{port}/api/chat", {"text": "/whoami"})["reply"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=STARTUP)
    return err


def printed_createdb(stderr: str) -> list[str]:
    found = re.search(r"start halo again: (createdb .+)$", stderr, re.MULTILINE)
    assert found, f"halo did not say how to create the database:\n{stderr}"
    return shlex.split(found.group(1))


@pytest.mark.postgres
@pytest.mark.slow  # `halo` as a process
def test_a_newcomer_moves_to_postgresql_by_doing_what_halo_says(tmp_path: Path) -> None:
    if shutil.which("createdb") is None:
        pytest.skip("PostgreSQL's client tools (createdb) are not installed here")
    server = POSTGRES.rsplit("/", 1)[0]
    env = plain_environment()
    home = tmp_path / "home"
    home.mkdir()
    (home / "halo.yaml").write_text(FAMILY_YAML)
    name = f"newcomer_{uuid.uuid4().hex[:10]}"
    url = f"{server}/{name}"
    try:
        # the family lives in HALO_HOME; the database is not there yet: halo says how to make it
        refused = run("storage", "migrate", "--to", url, home=home, env=env)
        assert refused.returncode == 2
        assert f'database "{name}" does not exist' in refused.stderr
        createdb = printed_createdb(refused.stderr)
        assert createdb == shlex.split(createdb_command(url))
        made = subprocess.run(createdb, capture_output=True, text=True, timeout=60, env=env)
        assert made.returncode == 0, made.stderr

        moved = run("storage", "migrate", "--to", url, home=home, env=env)
        assert moved.returncode == 0, moved.stderr
        step = re.search(r"^Next: set `(storage: \{url: \S+\})` in halo.yaml", moved.stdout, re.MULTILINE)
        assert step, moved.stdout
        with (home / "halo.yaml").open("a") as config:  # done as it says
            config.write(step.group(1) + "\n")
        assert read_yaml(home / "halo.yaml")["storage"]["url"] == url

        quiet = serve_once(home, env)
        assert "alembic" not in quiet, "Alembic's lines show only when asked for"
        asked = serve_once(home, env, "-v")
        assert re.search(r" INFO alembic\.", asked), "with -v, Alembic says what it did"
    finally:
        import asyncio

        asyncio.run(drop_database(name))


@pytest.mark.postgres
@pytest.mark.slow  # `halo` as a process
def test_halo_serve_on_a_database_that_does_not_exist_says_the_createdb_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    name = f"never_made_{uuid.uuid4().hex[:10]}"
    url = f"{POSTGRES.rsplit('/', 1)[0]}/{name}"
    (home / "halo.yaml").write_text(FAMILY_YAML + f"storage: {{url: {url}}}\n")
    proc = halo_cmd("serve", home=home, port=free_port(), env=plain_environment())
    _, err = proc.communicate(timeout=STARTUP)
    assert proc.returncode == 2
    assert "halo: cannot start." in err and f'database "{name}" does not exist' in err
    assert printed_createdb(err) == shlex.split(createdb_command(url))
    assert "Traceback" not in err


# --- halo chat ----------------------------------------------------------------------------


@pytest.mark.slow  # `halo` as a process
def test_halo_chat_keeps_log_lines_out_of_the_conversation(tmp_path: Path) -> None:
    """A model that cannot be reached is logged (a warning for whoever runs halo) while the
    member is typing: the warning goes to the log file, the member gets a plain reply."""
    home = tmp_path / "home"
    home.mkdir()
    nobody = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    llm = f"llm: {{provider: openai-compatible, model: m, base_url: {nobody}, api_key: k, max_retries: 0}}\n"
    (home / "halo.yaml").write_text(FAMILY_YAML + llm)
    proc = halo_cmd("chat", home=home, env=plain_environment(), stdin=subprocess.PIPE)
    out, err = proc.communicate("/whoami\nwhat's for dinner?\n", timeout=STARTUP)
    assert proc.returncode == 0, err
    assert "You are Wags" in out
    assert out.count("halo> ") >= 2, out
    assert not LOG_LINE.search(out) and not LOG_LINE.search(err), f"log lines in the chat:\n{out}\n{err}"
    logged = (home / "logs" / "chat.log").read_text()
    assert LOG_LINE.search(logged), "halo's log lines are in HALO_HOME/logs/chat.log instead"
