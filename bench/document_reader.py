"""Benchmark: what a document reader (halo/media/read_document.py, one child process per
document) costs, against a bare `python -c pass` measured in the same run.

- start: a text file and a two-page letter end to end (the child's start, pypdf's import for
  the letter, the read), wall time, median of `--repeat`;
- hostile: the probe's PDFs (tests/document_support.hostile_pdf) under the default limits, the
  child's CPU seconds and peak RSS until its limit or the deadline stops it, and what it said.

Run: `uv run python bench/document_reader.py [--repeat 5] [--deadline 60]`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.document_support import SCHOOL_LETTER, hostile_pdf  # noqa: E402

MEMORY_MB = 512  # memory.document_reader_mb's default


def run(argv: list[str], data: bytes, timeout: float) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one child, and the start of its answer."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    deadline = threading.Timer(timeout, proc.kill)  # as halo does: killed, not waited on
    deadline.start()
    assert proc.stdin is not None and proc.stdout is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(data)
        proc.stdin.close()
    out = proc.stdout.read()  # until the child exits
    deadline.cancel()
    _, status, usage = os.wait4(proc.pid, 0)  # reaped here, so its own usage can be read
    proc.returncode = os.waitstatus_to_exitcode(status)
    said = out[:60].decode(errors="replace") if out else f"(ended by signal {-proc.returncode})"
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, said


def reader(kind: str, deadline: float) -> list[str]:
    return [
        "-m",
        "halo.media.read_document",
        kind,
        "200",
        "400000",
        str(int(deadline)),
        str(MEMORY_MB),
        str(os.getpid()),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=60)
    args = parser.parse_args()
    starts = {
        "python -c pass": (["-c", "pass"], b""),
        "reader, a text file": (reader("text", 60), b"Swimming moves to 10:30.\n"),
        "reader, a 2-page PDF": (reader("pdf", 60), SCHOOL_LETTER),
    }
    walls: dict[str, list[float]] = {name: [] for name in starts}
    for _ in range(args.repeat):  # interleaved: load on the machine weighs on each alike
        for name, (argv, data) in starts.items():
            walls[name].append(run(argv, data, 30)[0])
    print(f"start, median of {args.repeat} (wall):")
    for name, times in walls.items():
        print(f"  {name:24s} {statistics.median(times) * 1000:7.0f} ms")
    hostile = {
        "200 pages x one 2 MB stream": hostile_pdf(200, 2),
        "200 pages x one 10 MB deflated stream": hostile_pdf(200, 10, compress=True),
    }
    print(f"hostile PDFs, limits: {int(args.deadline)} s CPU, {MEMORY_MB} MB:")
    for name, data in hostile.items():
        wall, cpu, rss, said = run(reader("pdf", args.deadline), data, args.deadline)
        print(f"  {name} ({len(data):,} bytes): wall {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {rss:.0f} MB, {said}")
    print(f"(this machine: load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
