"""Benchmark: build and query a scope's semantic index at 10k and 100k chunks.

Synthetic chunks (~40 words drawn from a Zipf-distributed 8,000-word vocabulary, about the
size of one transcript turn pair) with random unit vectors, so embedding time is left out:
this measures the index — SQLite, FTS5, sqlite-vec and the ranking code. Reported:

- build rate: chunks/s through `ScopeIndex.add_chunks` + `store_vectors` (rows, FTS5, vec0);
- hybrid query p50/p99 through the product's `search()` (BM25 + cosine candidates, fusion,
  decay, MMR), with vectors scanned from the NumPy mirror of vec0, and again with vec0's own
  KNN (`max_mirrored=0`), and the first query that loads the mirror;
- a brute-force NumPy cosine top-k over the same vectors, in the same run, as the baseline;
- bytes on disk per chunk (database after a WAL checkpoint).

Goals (issue 5): hybrid p50 ≤ 5 ms at 10k and ≤ 30 ms at 100k, ≤ 2 KB a chunk.
Run: `uv run python bench/semantic.py [--sizes 10000 100000] [--dim 256] [--queries 200]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as halo runs it (see halo/runtime/cli.py)

import numpy as np

from memory.semantic.chunking import Chunk
from memory.semantic.embedders import EmbedderIdentity
from memory.semantic.index import ScopeIndex
from memory.semantic.search import SearchParams, search

BATCH = 2000


def vocabulary(rng: np.random.Generator, size: int = 8000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, size=int(n))) for n in rng.integers(3, 10, size=size * 2)}
    return sorted(words)[:size]


def synthetic_chunks(n: int, words: list[str], rng: np.random.Generator) -> list[Chunk]:
    ranks = np.arange(1, len(words) + 1)
    p = 1.0 / ranks
    p /= p.sum()
    picks = rng.choice(len(words), size=(n, 40), p=p)
    base = 1_700_000_000.0
    return [
        Chunk("transcript", 2 * i + 1, 2 * i + 2, " ".join(words[j] for j in row), base + i * 60.0)
        for i, row in enumerate(picks)
    ]


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples) * 1000.0, q))


def run(n: int, dim: int, queries: int, folder: Path) -> dict[str, float]:
    rng = np.random.default_rng(n)
    words = vocabulary(rng)
    chunks = synthetic_chunks(n, words, rng)
    vectors = unit(rng, n, dim)
    identity = EmbedderIdentity("bench", "random", dim)
    path = folder / f"bench-{n}.db"
    index = ScopeIndex(path, f"bench:{n}")
    index.ensure_chunking()
    index.ensure_vectors(identity)

    started = time.perf_counter()
    for start in range(0, n, BATCH):
        part = chunks[start : start + BATCH]
        index.add_chunks(part, {"transcript_offset": start + len(part)})
        index.store_vectors(identity, [c.hash for c in part], vectors[start : start + BATCH])
    build = time.perf_counter() - started

    index.checkpoint()
    size = sum(p.stat().st_size for p in folder.glob(f"bench-{n}.db*"))

    # queries: three mid-frequency words, and a vector near one chunk's (a plausible paraphrase)
    mid = words[50:2000]
    texts = [" ".join(rng.choice(mid, size=3)) for _ in range(queries)]
    targets = rng.integers(0, n, size=queries)
    qvecs = vectors[targets] + 0.42 * unit(rng, queries, dim)
    qvecs = (qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)).astype(np.float32)
    params = SearchParams(limit=5, min_score=0.0, now=1_700_000_000.0 + n * 60.0)

    started = time.perf_counter()
    search([index], texts[0], qvecs[0], params)  # loads the NumPy mirror of the vec0 table
    first = time.perf_counter() - started

    # interleaved, so the product path and the baseline see the same machine load
    vec0_params = SearchParams(limit=5, min_score=0.0, now=params.now, max_mirrored=0)
    hybrid: list[float] = []
    vec0: list[float] = []
    brute: list[float] = []
    for n_query, (text, q) in enumerate(zip(texts, qvecs, strict=True)):
        t = time.perf_counter()
        search([index], text, q, params)
        hybrid.append(time.perf_counter() - t)
        t = time.perf_counter()
        scores = vectors @ q
        top = np.argpartition(-scores, 40)[:40]
        top[np.argsort(-scores[top])]
        brute.append(time.perf_counter() - t)
        if n_query % 4 == 0:  # vec0's scan is slow at 100k: a quarter of the queries is enough
            t = time.perf_counter()
            search([index], text, q, vec0_params)
            vec0.append(time.perf_counter() - t)

    found = sum(
        int(t) + 1 in {i for i, _ in index.vector_candidates(q, 5, 10**9)} for t, q in zip(targets, qvecs, strict=True)
    )
    index.close()
    return {
        "chunks": n,
        "build_rate": n / build,
        "build_s": build,
        "bytes_per_chunk": size / n,
        "hybrid_p50": pct(hybrid, 50),
        "hybrid_p99": pct(hybrid, 99),
        "first_query_ms": first * 1000,
        "vec0_p50": pct(vec0, 50),
        "vec0_p99": pct(vec0, 99),
        "numpy_p50": pct(brute, 50),
        "numpy_p99": pct(brute, 99),
        "target_in_top5": found / queries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            print(f"building {n} chunks ({args.dim} dims) …", flush=True)
            rows.append(run(n, args.dim, args.queries, Path(tmp)))
    print()
    print(
        "| chunks | build (chunks/s) | hybrid p50 / p99 (ms) | hybrid via vec0 KNN p50 / p99 | "
        "NumPy brute force p50 / p99 | first query (mirror load) | bytes/chunk |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['chunks']:,} | {r['build_rate']:,.0f} | {r['hybrid_p50']:.2f} / {r['hybrid_p99']:.2f} | "
            f"{r['vec0_p50']:.2f} / {r['vec0_p99']:.2f} | {r['numpy_p50']:.2f} / {r['numpy_p99']:.2f} | "
            f"{r['first_query_ms']:.0f} ms | {r['bytes_per_chunk']:,.0f} |"
        )
    print(
        f"\n(dim {args.dim}; {args.queries} queries; the noisy query vector's source chunk was in the vector "
        f"top 5 in {rows[-1]['target_in_top5']:.0%} of queries at {rows[-1]['chunks']:,})"
    )


if __name__ == "__main__":
    main()
