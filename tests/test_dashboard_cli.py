"""`halo dashboard`: a fresh one-time login link that the running server (another process) redeems."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import write_home
from tests.test_serve_cli import halo


def test_halo_dashboard_prints_a_link_the_server_redeems_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    from halo.web_auth import DashboardLogin

    home = write_home(tmp_path / "home", "admin: {port: 8899}\n")
    code, out, err = halo("dashboard", home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    link = next(line for line in out.splitlines() if "/login?token=" in line)
    assert link.startswith("http://127.0.0.1:8899/login?token=")
    token = link.split("token=", 1)[1]
    [made] = list((home / "logins").iterdir())
    assert made.stat().st_mode & 0o077 == 0 and token not in made.read_text()  # only its hash names the file
    server = DashboardLogin(home / "logins")  # what the running server holds
    assert asyncio.run(server.redeem(token)) is not None
    assert asyncio.run(server.redeem(token)) is None
