"""What the fake model servers (``tests.fake_gemini``, ``tests.fake_openai``) share: a real
HTTP server on 127.0.0.1 (a random port) in a background thread, every request recorded, and
the answers a test scripts, one queue for generation and one for embeddings."""

from __future__ import annotations

import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: ScriptedServer


class ScriptedServer:
    """``start`` it, ``push`` answers, read ``requests``, ``stop`` it. A subclass names its
    request ``handler`` (which finds the fake as ``self.server.fake``) and its thread."""

    handler: type[BaseHTTPRequestHandler]
    thread_name = "fake-model-server"

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.stopping = threading.Event()
        self._script: deque[Any] = deque()
        self._embedding_script: deque[Any] = deque()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, f"the {self.thread_name} is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self, port: int = 0):
        self._server = _Server(("127.0.0.1", port), self.handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release stalled requests, and close the listening socket."""
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def push(self, *answers: Any) -> None:
        """Queue answers for the next generation requests, in order."""
        with self._lock:
            self._script.extend(answers)

    def push_embedding(self, *answers: Any) -> None:
        """Queue failures for the next embedding requests, in order."""
        with self._lock:
            self._embedding_script.extend(answers)

    def pending(self) -> int:
        """How many scripted answers (of either queue) no request has taken yet."""
        with self._lock:
            return len(self._script) + len(self._embedding_script)

    def take(self, request: Any, *, embedding: bool) -> Any | None:
        """Store ``request`` and hand it the next answer of its queue (None when empty)."""
        with self._lock:
            self.requests.append(request)
            queue = self._embedding_script if embedding else self._script
            return queue.popleft() if queue else None
