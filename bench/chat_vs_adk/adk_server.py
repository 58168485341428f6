"""ADK's own API server for ``bench.chat_vs_adk``: ``get_fast_api_app`` under uvicorn, sessions in
DatabaseSessionService on PostgreSQL, one agent whose model streams a scripted reply.

Runs in google-adk's virtual environment (``bench.adk_venv``):

    build/adk-venv/bin/python -m bench.chat_vs_adk.adk_server --port 8001 \\
        --db-url postgresql+asyncpg://postgres@127.0.0.1:5432/bench_adk --processes 2

As shipped it is what ``adk api_server`` starts (uvicorn's defaults: its access log, the event loop
and HTTP parser it finds); ``--tuned`` adds the product's start-up GC tuning
(``chatapp/process.py``) and asks uvicorn for uvloop and httptools, each only where this
environment has it installed (``--describe`` says which). Several processes are uvicorn's own
workers on one listening socket.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
from collections.abc import AsyncGenerator
from importlib.metadata import version

APP_NAME = "chat"
CONFIG_VARIABLE = "BENCH_CHAT_VS_ADK_SERVER"  # the workers' settings, as JSON


def scripted_pieces(text: str, chunks: int) -> list[str]:
    """``text`` cut at word boundaries into ``chunks`` pieces (fewer when it has fewer words)."""
    words = re.findall(r"\S+\s*", text)
    size = max(1, -(-len(words) // chunks))
    return ["".join(words[start : start + size]) for start in range(0, len(words), size)]


def app_build():
    """The FastAPI application of one worker, from the settings its parent put in the
    environment; tuned, it freezes what start-up allocated."""
    from google.adk.agents import LlmAgent
    from google.adk.cli.fast_api import get_fast_api_app
    from google.adk.cli.utils.base_agent_loader import BaseAgentLoader
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    from bench.adk_side import server_gc_tuning

    settings = json.loads(os.environ[CONFIG_VARIABLE])

    class ScriptedLlm(BaseLlm):
        """Echoes the user's message as ``You said: "…"`` in ``chunks`` pieces, each after a
        pause of ``chunk_delay`` seconds, then the whole reply, as a streaming model does."""

        chunks: int
        chunk_delay: float

        async def generate_content_async(
            self, llm_request, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            said = "".join(
                part.text or "" for part in llm_request.contents[-1].parts or () if part.text
            )
            reply = f"You said: \u201c{said.strip()}\u201d"
            for piece in scripted_pieces(reply, self.chunks):
                await asyncio.sleep(self.chunk_delay)
                if stream:
                    yield LlmResponse(
                        content=types.Content(role="model", parts=[types.Part(text=piece)]),
                        partial=True,
                    )
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=reply)]),
                finish_reason=types.FinishReason.STOP,
            )

    agent = LlmAgent(
        name="assistant",
        model=ScriptedLlm(
            model="bench-scripted", chunks=settings["chunks"], chunk_delay=settings["chunk_delay"]
        ),
        instruction="You are a helpful assistant.",
    )

    class OneAgent(BaseAgentLoader):
        def load_agent(self, agent_name: str) -> LlmAgent:
            if agent_name != APP_NAME:
                raise ValueError(f"no agent {agent_name!r}")
            return agent

        def list_agents(self) -> list[str]:
            return [APP_NAME]

    app = get_fast_api_app(
        agents_dir=settings["agents_dir"],
        agent_loader=OneAgent(),
        session_service_uri=settings["db_url"],
        web=False,
    )
    if settings["tuned"]:
        server_gc_tuning()
    return app


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def describe() -> dict:
    """Versions, and which of the tuned server's parts this environment has."""
    packages = ("google-adk", "fastapi", "uvicorn", "sqlalchemy", "asyncpg")
    return {
        **{name: version(name) for name in packages},
        "uvloop_installed": installed("uvloop"),
        "httptools_installed": installed("httptools"),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT")
    parser.add_argument("--db-url", help="DatabaseSessionService's URL (postgresql+asyncpg://…)")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--chunk-delay", type=float, default=0.02)
    parser.add_argument("--agents-dir", help="ADK's agents directory (its local files go there)")
    parser.add_argument("--tuned", action="store_true", help="GC tuning, uvloop, httptools")
    parser.add_argument("--describe", action="store_true", help="print versions as JSON and exit")
    args = parser.parse_args(argv)
    if args.describe:
        print(json.dumps(describe()))
        return
    import uvicorn

    os.environ[CONFIG_VARIABLE] = json.dumps(
        {
            "db_url": args.db_url,
            "chunks": args.chunks,
            "chunk_delay": args.chunk_delay,
            "agents_dir": args.agents_dir,
            "tuned": args.tuned,
        }
    )
    # As shipped, `adk api_server` depends on plain uvicorn: asyncio's loop and h11. Named here,
    # because uvicorn's "auto" would take uvloop and httptools from this environment.
    loop, http = "asyncio", "h11"
    if args.tuned:
        loop = "uvloop" if installed("uvloop") else "asyncio"
        http = "httptools" if installed("httptools") else "h11"
    uvicorn.run(
        "bench.chat_vs_adk.adk_server:app_build",
        factory=True,
        host="127.0.0.1",
        port=args.port,
        workers=args.processes if args.processes > 1 else None,
        loop=loop,
        http=http,
    )


if __name__ == "__main__":
    main()
