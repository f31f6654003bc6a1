"""`halo --help` and `halo policy explain` never load the Agents SDK or a model client.

A fact about imports, checked in a fresh interpreter (this test process has loaded them all
already); how long the commands take is measured in `bench/cli_startup.py`, not here.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

from halo.runtime.cli import STARTUP_ERRORS
from tests import processes
from tests.conftest import write_home

pytestmark = pytest.mark.slow  # fresh interpreters

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ["agents", "openai", "anthropic", "any_llm", "telegram", "sqlalchemy"]

PROBE = """
import contextlib, io, json, sys
import halo.runtime.cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = halo.runtime.cli.main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "out": out.getvalue(), "loaded": [m for m in HEAVY if m in sys.modules]}))
""".replace("HEAVY", repr(HEAVY))


def run_cli(home: Path, *argv: str) -> dict:
    env = {**os.environ, "HALO_HOME": str(home)}
    done = processes.run(
        [sys.executable, "-c", PROBE, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--help"], "policy"),
        (["policy", "explain", "--member", "mom", "--scope", "telegram:-1001234"], "ALLOW: mom converse"),
    ],
    ids=["help", "policy-explain"],
)
def test_light_commands_never_load_the_model_sdk(tmp_path: Path, argv: list[str], says: str) -> None:
    home = write_home(tmp_path / "home")
    result = run_cli(home, *argv)
    assert result["code"] == 0
    assert says in result["out"]
    assert result["loaded"] == [], f"`halo {' '.join(argv)}` imported {result['loaded']}"


def test_every_startup_error_it_names_exists() -> None:
    """The CLI names its startup errors as strings (to import nothing): a rename must not hide one."""
    for module, name in STARTUP_ERRORS:
        error = getattr(importlib.import_module(module), name)
        assert issubclass(error, Exception), f"{module}.{name}"


def test_serve_with_a_config_typo_says_so_without_loading_the_sdk(tmp_path: Path) -> None:
    home = write_home(tmp_path / "home", "llm:\n  provider: openai-compatible\n  colour: blue\n")
    env = {**os.environ, "HALO_HOME": str(home)}
    done = processes.run(
        [sys.executable, "-c", PROBE, "serve"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 2
    assert "llm.colour" in done.stderr and "Traceback" not in done.stderr
    assert result["loaded"] == [], f"`halo serve` with a typo imported {result['loaded']}"


def test_the_adapter_port_loads_no_sdk_store_or_platform_library() -> None:
    """The port names SQLAlchemy's types in annotations only (`Tables`), so lint-imports lets
    `halo.port -> sqlalchemy` through: this is the check that importing it loads none of them."""
    code = f"import json, sys; import halo.port; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = processes.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
