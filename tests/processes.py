"""The one way a test starts a process: in its own process group, killed with the test that
started it (the conftest's reaper), and on Linux dead with the worker that started it even when
that worker is SIGKILLed (PR_SET_PDEATHSIG), so a `halo serve` never outlives its test run.

`popen` and `run` stand in for `subprocess.Popen` and `subprocess.run`, `start` for
`asyncio.create_subprocess_exec`; `halo_argv` is `halo …` as this interpreter runs it. Only the
standard library here: the conftest imports this module for every test, even a pure one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_started: list[int] = []  # process-group ids (each child leads its own group), oldest first


def halo_argv(*args: str) -> list[str]:
    """`halo ARGS…` as this interpreter runs it (no `uv run` in between to outlive)."""
    return [sys.executable, "-m", "halo.runtime.cli", *args]


def _dies_with(parent: int) -> Callable[[], None]:
    """Runs in the child between fork and exec: SIGKILL when the thread that started it ends
    (the worker's main thread, in practice), or exit at once if the worker is already gone."""

    def setup() -> None:
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return setup


def _own_group(kwargs: dict[str, Any]) -> dict[str, Any]:
    if "preexec_fn" in kwargs or "start_new_session" in kwargs or "process_group" in kwargs:
        raise TypeError("tests.processes sets the child's group and parent-death signal itself")
    return {"cwd": ROOT, **kwargs, "process_group": 0, "preexec_fn": _dies_with(os.getpid())}


def popen(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **kwargs)` in its own group, reaped with the test (cwd: the repo)."""
    proc = subprocess.Popen(list(argv), **_own_group(kwargs))
    _started.append(proc.pid)
    return proc


async def start(program: str, *args: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec(program, *args, **kwargs)`, the same way as `popen`."""
    proc = await asyncio.create_subprocess_exec(program, *args, **_own_group(kwargs))
    _started.append(proc.pid)
    return proc


def run(
    argv: Sequence[str],
    *,
    input: Any = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run`, the same way as `popen`; a timeout kills the child's whole group."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with popen(argv, **kwargs) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            kill_group(proc.pid)
            proc.wait()
            raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def kill_group(pgid: int) -> None:
    """SIGKILL every process in the group (the leader and what it started, e.g. document readers)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def mark() -> int:
    """Where the reaper starts: processes started after this belong to the running test."""
    return len(_started)


def reap(since: int = 0) -> None:
    """Kill the groups of every process started since `since` and forget them. A test's own
    clean-up has usually stopped them already; this is what holds when it could not."""
    for pgid in _started[since:]:
        kill_group(pgid)
    del _started[since:]
