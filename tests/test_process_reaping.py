"""The suite's own hygiene: a process a test starts dies with its test and with its worker, the
embedded FalkorDB dies with halo, and no test sees the caller's HALO_HOME or HALO_* settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests import processes
from tests.waiting import until

SLOW = pytest.mark.slow  # each starts a process: an interpreter, a shell, a FalkorDB
LINUX = pytest.mark.skipif(sys.platform != "linux", reason="death-with-parent is Linux's PR_SET_PDEATHSIG")


def running(pid: int) -> bool:
    """True while `pid` runs (a zombie has ended: it only waits for a parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def middleman(code: str) -> tuple[subprocess.Popen[str], int]:
    """A worker stand-in: an interpreter that starts a grandchild as `code` says and prints its pid.
    It is started bare (not through tests.processes), as pytest-xdist starts a worker."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=processes.ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline())
    return proc, grandchild


@SLOW
@LINUX
def test_a_process_a_test_started_dies_with_its_worker() -> None:
    worker, child = middleman(
        """
        import sys, time
        from tests import processes
        child = processes.popen(["sleep", "600"])
        print(child.pid, flush=True)
        time.sleep(600)
        """
    )
    assert running(child)
    worker.send_signal(signal.SIGKILL)  # as a worker killed for a timeout, or by a crash
    worker.wait()
    until(lambda: not running(child), within=60, what="the test's process to die with its killed worker")


@SLOW
def test_the_reaper_kills_the_whole_group_of_a_test_it_ends() -> None:
    since = processes.mark()
    shell = processes.popen(["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    assert shell.stdout is not None
    grandchild = int(shell.stdout.readline())
    assert os.getpgid(grandchild) == shell.pid  # its own group, with what it started
    processes.reap(since)
    shell.wait()
    until(lambda: not running(grandchild), within=60, what="reap to end the group's other process")


@SLOW
def test_run_kills_the_group_when_its_deadline_passes() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run(["sleep", "600"], timeout=0.5)


@SLOW
@LINUX
def test_the_embedded_falkordb_dies_with_a_killed_halo(tmp_path: Path) -> None:
    from tests.graph_support import require_graph_extra

    require_graph_extra()
    halo, server = middleman(
        f"""
        import asyncio, time
        from pathlib import Path
        from memory.graph.server import FalkorServer

        async def main():
            server = FalkorServer(Path({str(tmp_path / "graph")!r}))
            await server.start()
            print(server.process.pid, flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
        """
    )
    try:
        assert running(server)
        halo.send_signal(signal.SIGKILL)  # no `stop()`: the kernel is all that is left to end it
        halo.wait()
        until(lambda: not running(server), within=60, what="FalkorDB to die with the halo that started it")
    finally:
        if running(server):
            os.kill(server, signal.SIGKILL)


@pytest.mark.own_store  # it checks that no HALO_* reaches a test, so none is set for it
def test_the_suite_runs_without_the_callers_halo_settings_or_home() -> None:
    assert not [name for name in os.environ if name.startswith("HALO_") and not name.startswith("HALO_TEST_")]
    from config.paths import default_home

    home = Path(os.environ["HOME"])
    assert Path(os.path.expanduser("~")) == home
    assert default_home() == home / ".halo"
    assert home.resolve().is_relative_to(Path(tempfile.gettempdir()).resolve())
