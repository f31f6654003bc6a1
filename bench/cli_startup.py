"""Benchmark: how long `halo --help` and `halo policy explain` take, against `import agents`.

Commands that never talk to the model must not pay for the Agents SDK (issue 10 item 7:
each under a fifth of `python -c "import agents"`). Every measurement is a fresh
interpreter (`sys.executable`, so the same venv), run in the same session and interleaved,
so load on the machine weighs on all of them alike; the median of `--repeat` runs is
reported. Exits 1 when a ratio is at or over the limit.

Run: `uv run python bench/cli_startup.py [--repeat 7]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 0.2
FAMILY = """\
family: {name: Sharma}
members:
  - {id: wags, name: Wags, role: parent, telegram_user_id: 1001}
  - {id: mom,  name: Mom,  role: parent, telegram_user_id: 1002}
owner: wags
parents_group: {telegram_chat_id: -1001234}
"""

COMMANDS: dict[str, list[str]] = {
    "import agents": ["-c", "import agents"],
    "halo --help": ["-m", "halo.runtime.cli", "--help"],
    "halo policy explain": [
        "-m",
        "halo.runtime.cli",
        "policy",
        "explain",
        "--member",
        "mom",
        "--scope",
        "telegram:-1001234",
    ],
}
BASELINE = "import agents"


def run_once(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "halo.yaml").write_text(FAMILY)
        env = {**os.environ, "HALO_HOME": home}
        for args in COMMANDS.values():  # warm the bytecode and file caches once
            run_once(args, env)
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(opts.repeat):
            for name, args in COMMANDS.items():
                times[name].append(run_once(args, env))
    medians = {name: statistics.median(runs) for name, runs in times.items()}
    base = medians[BASELINE]
    print(f"median of {opts.repeat} runs each, interleaved, fresh interpreter every time")
    print(f"| command | median s | ratio to `{BASELINE}` |")
    print("| --- | --- | --- |")
    ok = True
    for name, median in medians.items():
        ratio = median / base
        verdict = "" if name == BASELINE else (" ok" if ratio < LIMIT else f" OVER {LIMIT}")
        ok = ok and (name == BASELINE or ratio < LIMIT)
        print(f"| {name} | {median:.3f} | {ratio:.2f}{verdict} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
