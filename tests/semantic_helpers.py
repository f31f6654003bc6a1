"""Test helpers for semantic recall: a small real model2vec StaticModel, and an embedder that counts.

The static model is built here from hand-made vectors and a word-level tokenizer (the
real `model2vec` and `tokenizers` libraries, tiny data): words of one concept ("dentist",
"teeth", "orthodontist") share most of their vector, so paraphrases land near each other
the way they do with a distilled model. Every other word gets a vector of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from model2vec import StaticModel
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from memory.semantic.embedders import EmbedderIdentity, Model2VecEmbedder

CONCEPTS: dict[str, list[str]] = {
    "teeth": [
        "dentist",
        "dental",
        "teeth",
        "tooth",
        "orthodontist",
        "braces",
        "cavity",
        "cleaning",
        "floss",
        "molar",
        "patel",
    ],
    "soccer": ["soccer", "football", "cleats", "goalkeeper", "match", "league", "coach", "practice", "pitch"],
    "music": ["piano", "violin", "recital", "music", "lesson", "lessons", "scales", "concert", "teacher"],
    "school": [
        "school",
        "homework",
        "teacher",
        "exam",
        "exams",
        "report",
        "grades",
        "principal",
        "semester",
        "maths",
        "math",
        "test",
        "science",
    ],
    "food": [
        "dinner",
        "lunch",
        "breakfast",
        "recipe",
        "cook",
        "pasta",
        "vegetarian",
        "allergy",
        "peanut",
        "peanuts",
        "nuts",
        "allergic",
        "food",
        "eat",
        "epipen",
    ],
    "travel": [
        "trip",
        "vacation",
        "holiday",
        "flight",
        "flights",
        "hotel",
        "beach",
        "passport",
        "travel",
        "lisbon",
        "portugal",
        "visit",
    ],
    "car": ["car", "mechanic", "tyres", "tires", "oil", "garage", "service", "brakes", "vehicle", "van"],
    "money": [
        "budget",
        "bank",
        "savings",
        "pocket",
        "money",
        "allowance",
        "pay",
        "bill",
        "bills",
        "insurance",
        "spend",
        "spent",
    ],
    "health": [
        "doctor",
        "fever",
        "medicine",
        "sick",
        "flu",
        "vaccine",
        "clinic",
        "pediatrician",
        "checkup",
        "appointment",
        "paediatrician",
        "cough",
    ],
    "birthday": ["birthday", "party", "cake", "presents", "gift", "gifts", "celebrate", "balloons", "turning"],
    "pets": ["dog", "vet", "puppy", "walk", "leash", "biscuit", "cat", "pet", "kibble"],
    "garden": ["garden", "tomatoes", "plants", "watering", "lawn", "seeds", "compost", "grow"],
}

_WORD = re.compile(r"\w+")


def concept_model(extra_words: Iterable[str] = (), dim: int = 48, seed: int = 7) -> StaticModel:
    """A real StaticModel over the concept words plus `extra_words` (each its own direction)."""
    rng = np.random.default_rng(seed)
    vocab: dict[str, int] = {"[PAD]": 0, "[UNK]": 1}
    rows: list[np.ndarray] = [np.zeros(dim), np.zeros(dim)]
    centres = {name: rng.normal(size=dim) for name in CONCEPTS}

    def add(word: str, vector: np.ndarray) -> None:
        if word not in vocab:
            vocab[word] = len(rows)
            rows.append(vector)

    for name, words in CONCEPTS.items():
        for word in words:
            add(word, centres[name] + 0.55 * rng.normal(size=dim))
    for word in sorted({w.lower() for w in extra_words}):
        add(word, 0.6 * rng.normal(size=dim))
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return StaticModel(np.asarray(rows, dtype=np.float32), tokenizer, normalize=True)


def words_of(texts: Iterable[str]) -> set[str]:
    return {w.lower() for t in texts for w in _WORD.findall(t)}


def save_concept_model(folder: Path, extra_words: Iterable[str] = ()) -> Path:
    concept_model(extra_words).save_pretrained(str(folder))
    return folder


class CountingEmbedder:
    """Wraps an embedder and records every text it was asked to embed."""

    def __init__(self, inner: Model2VecEmbedder | None = None) -> None:
        self.inner = inner or Model2VecEmbedder(concept_model(), "concept-test")
        self.texts: list[str] = []
        self.calls = 0

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts.extend(texts)
        return await self.inner.embed(texts)

    def reset(self) -> None:
        self.texts.clear()
        self.calls = 0
