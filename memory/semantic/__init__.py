"""Semantic recall: a per-scope hybrid index (sqlite-vec + FTS5) over markdown memory and transcripts."""

import os

# The index's NumPy work is small matrix-vector products. OpenBLAS threads buy nothing there and,
# on a two-core machine that also runs the event loop, double a query's time. Set before NumPy
# loads OpenBLAS; an explicit OPENBLAS_NUM_THREADS still wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


from memory.semantic.chunking import CHUNKING_VERSION, Chunk, chunk_markdown, chunk_transcript
from memory.semantic.index import ScopeIndex
from memory.semantic.search import Hit, SearchParams
from memory.semantic.service import SemanticMemory
from memory.semantic.sqlite import SqliteSupport, probe
from memory.semantic.sync import SyncReport

__all__ = [
    "CHUNKING_VERSION",
    "Chunk",
    "Hit",
    "ScopeIndex",
    "SearchParams",
    "SemanticMemory",
    "SqliteSupport",
    "SyncReport",
    "chunk_markdown",
    "chunk_transcript",
    "probe",
]
