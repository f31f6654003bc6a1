"""The import rules of docs/ARCHITECTURE.md, checked by import-linter (contracts in pyproject.toml).

Each contract is its own test so a failure names the rule that broke. `BROKEN_TODAY` lists
the contracts today's code still breaks, each with the work that will make it hold; they
run as strict xfails, so the day one starts to hold the suite says to move it to the kept
list.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import pytest

from tests import processes

pytestmark = pytest.mark.slow  # lint-imports in an interpreter of its own

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

CONTRACTS = {
    c["id"]: c["name"]
    for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
}
CONTRACT_IDS = list(CONTRACTS)

# contract id -> why it does not hold yet
BROKEN_TODAY: dict[str, str] = {}  # every contract holds


@pytest.fixture(scope="module")
def verdicts() -> dict[str, str]:
    """One lint-imports run (building the import graph is the cost): contract name -> its report line."""
    done = processes.run(
        [str(LINT_IMPORTS), "--no-logo"],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "1000"},  # one line a contract, unwrapped
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stdout.splitlines()
    found = {name: next((line for line in lines if line.startswith(name + " ")), "") for name in CONTRACTS.values()}
    assert all(found.values()), done.stdout + done.stderr
    return found


def test_every_contract_is_named_here() -> None:
    assert set(BROKEN_TODAY) <= set(CONTRACT_IDS), "BROKEN_TODAY names a contract pyproject.toml no longer has"
    assert len(CONTRACT_IDS) >= 4


@pytest.mark.parametrize(
    "contract_id",
    [
        pytest.param(cid, marks=pytest.mark.xfail(reason=BROKEN_TODAY[cid], strict=True))
        if cid in BROKEN_TODAY
        else cid
        for cid in CONTRACT_IDS
    ],
)
def test_contract_holds(contract_id: str, verdicts: dict[str, str]) -> None:
    line = verdicts[CONTRACTS[contract_id]]
    assert " KEPT" in line and " BROKEN" not in line, f"{line}\n(run `uv run lint-imports` for the import chains)"
