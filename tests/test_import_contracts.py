"""The import rules of ARCHITECTURE §3, checked by import-linter (contracts in pyproject.toml).

Each contract is its own test so a failure names the rule that broke. `BROKEN_TODAY` lists
the contracts today's code still breaks, each with the work that will make it hold; they
run as strict xfails, so the day one starts to hold the suite says to move it to the kept
list.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

CONTRACT_IDS = [
    c["id"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
]

# contract id -> why it does not hold yet
BROKEN_TODAY: dict[str, str] = {
    "adapters-know-only-the-port": "telegram, web and terminal still import halo.gateway, halo.db, transcripts and "
    "memory.redact; they hold once they are on halo.port (issue 10 item 1)",
}


def lint_imports(contract_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--contract", contract_id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


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
def test_contract_holds(contract_id: str) -> None:
    result = lint_imports(contract_id)
    assert "Contracts: 1 kept, 0 broken." in result.stdout, result.stdout + result.stderr
    assert result.returncode == 0
