"""Retrieval core of long-term memory: lexical (BM25) and semantic scores blended into one ranking.

Pure Python plus numpy, no Django and no database: the memory service loads a user's memories
(text, stored embedding, timestamps, importance) into a :class:`MemoryIndex` and asks it for the
best ones. Search is exact (every memory of the user is scored), deterministic (ties are broken by
id) and needs no LLM: see docs/memory-retrieval.md for the method and its LoCoMo figures.
"""

from .bm25 import BM25Index, DocId
from .embedders import Embedder, MiniLMEmbedder, NoEmbedder
from .expansion import terms_related, words_related
from .fusion import Ranked, rank, rank_arrays, recency_prior
from .index import MemoryIndex, Origin
from .text import STOPWORDS, normalise, stem, tokenize

__all__ = [
    "STOPWORDS",
    "BM25Index",
    "DocId",
    "Embedder",
    "MemoryIndex",
    "MiniLMEmbedder",
    "NoEmbedder",
    "Origin",
    "Ranked",
    "normalise",
    "rank",
    "rank_arrays",
    "recency_prior",
    "stem",
    "terms_related",
    "tokenize",
    "words_related",
]
