"""The model clients of one process share one TLS context (core/tls.py): a chat socket or a
background job that makes a client reads no certificate authorities again."""

from __future__ import annotations

import ssl

import pytest

from core.gemini import GeminiModel
from core.openai_compatible import OpenAICompatibleModel


@pytest.fixture
def certificate_reads(monkeypatch) -> list[tuple]:
    """Every time a TLS context of this process loads certificate authorities from now on."""
    reads: list[tuple] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(context, *args, **kwargs):
        reads.append(args or tuple(kwargs.values()))
        return load(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return reads


async def test_model_clients_after_the_first_read_no_certificates(settings, certificate_reads):
    settings.GEMINI_API_KEY = "a-key"
    settings.GOOGLE_GENAI_USE_VERTEXAI = False
    first = [GeminiModel("gemini-2.5-flash"), OpenAICompatibleModel("llama3.2")]
    certificate_reads.clear()

    later = [GeminiModel("gemini-2.5-flash"), OpenAICompatibleModel("llama3.2")]

    assert certificate_reads == []
    for model in [*first, *later]:
        await model.aclose()
