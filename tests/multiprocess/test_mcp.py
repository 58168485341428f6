"""MCP behind a load balancer without sticky sessions: the official MCP client's requests go
to the two daphne processes in turn, so it initializes on one and calls the tools on the
other, and is answered as one process would answer it."""

from __future__ import annotations

import itertools

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.multiprocess.serve import person_create

pytestmark = [pytest.mark.multiprocess, pytest.mark.postgres]


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer that keeps no session: each request goes to the next process."""

    def __init__(self, base_urls: list[str]) -> None:
        self._targets = itertools.cycle([httpx2.URL(url) for url in base_urls])
        self._transport = httpx2.AsyncHTTPTransport()
        self.ports: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = next(self._targets)
        request.url = request.url.copy_with(host=target.host, port=target.port)
        self.ports.append(target.port)
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._transport.aclose()


async def _remember_and_find(base_urls: list[str], token: str) -> tuple[list[int], dict, dict]:
    balancer = RoundRobin(base_urls)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(transport=balancer, headers=headers, timeout=30) as http,
        streamable_http_client(f"{base_urls[0]}/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        added = await session.call_tool("add_memory", {"text": "Sails a dinghy on Saturdays."})
        found = await session.call_tool("search_memories", {"query": "dinghy"})
    return balancer.ports, added.structured_content, found.structured_content


def test_either_process_answers_any_request_of_one_mcp_client(healthy_stack):
    stack = healthy_stack
    token = person_create(stack)["token"]
    base_urls = [stack.web_a.base_url, stack.web_b.base_url]

    ports, added, found = anyio.run(_remember_and_find, base_urls, token)

    assert set(ports) == {stack.web_a.port, stack.web_b.port}
    assert added["text"] == "Sails a dinghy on Saturdays."
    assert [memory["text"] for memory in found["memories"]] == ["Sails a dinghy on Saturdays."]
