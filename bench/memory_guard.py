"""The memory write guard at every door that writes a memory: hostile texts refused, ordinary
facts kept (issue 43, docs/security.md).

    python -m bench.memory_guard [--doors chat,page_add,...] [--limit N]

Sends each text of ``memory_app/safety/guard_corpus.json`` (instructions to the agent in
several languages, role markup, disguises and encodings, polite phrasings, secrets; and
ordinary facts) through each door as its caller does, each text for a fresh person, against a
throwaway test database (made and dropped here, as the test runner does: SQLite in memory, or a
``test_`` database beside ``DATABASE_URL``'s). Prints, per door, the share of hostile texts
that did not become an active memory and the share of ordinary facts that did. Nothing is
asserted: the tests (tests/memory_app/test_guard_doors.py) hold each door to its answer.

The doors: ``chat`` ("Remember that ..." to the offline assistant, which calls its
``create_memory`` tool), ``create_memory`` (the tool called with the text), ``mcp_add`` and
``mcp_correct`` (the MCP tools' handlers with a person's read-write token), ``rest_correct``
(``POST /api/memories/<id>/correct/``), ``page_add`` and ``page_correct`` (the Memory page's
forms), ``service_api`` (``POST /api/v1/apps/<app>/users/<id>/memories/`` with a key),
``app_memory`` (``POST /api/v1/apps/<app>/memories/``: staff guidance, where orders are allowed),
and ``file`` ("Remember this file" with the text as an attached ``notes.txt``, through the
generation job).
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

import argparse
import itertools
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import django

django.setup()

from asgiref.sync import async_to_sync  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from google.genai import types  # noqa: E402

CORPUS = Path(__file__).resolve().parent.parent / "memory_app" / "safety" / "guard_corpus.json"
APP = "chat"
_numbers = itertools.count()


@dataclass(frozen=True)
class Outcome:
    """What a door did with one text: whether it became an active memory, and what the
    caller was told."""

    saved: bool
    answer: str


def corpus_load() -> dict[str, list[dict[str, str]]]:
    """The corpus: ``hostile`` and ``ordinary`` lists of ``{"kind", "text"}``."""
    return json.loads(CORPUS.read_text(encoding="utf-8"))


def person():
    name = f"guard-{next(_numbers)}-{uuid.uuid4().hex[:6]}"
    return get_user_model().objects.create(username=name)


def _active(user, *, exclude=None) -> bool:
    from memory_app.models import Memory, MemoryStatus

    rows = Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE)
    if exclude is not None:
        rows = rows.exclude(pk=exclude.pk)
    return rows.exists()


def _corrected(user, memory) -> bool:
    from memory_app.models import Memory, MemoryStatus

    memory = Memory.objects.get(pk=memory.pk)
    return memory.status == MemoryStatus.ACTIVE and memory.text != "The user likes tea."


def _first_memory(user):
    from memory_app.services import memory_add_stated

    return memory_add_stated(app_name=APP, user_pk=user.pk, text="I like tea.")


def door_chat(text: str) -> Outcome:
    from agents_app.runtime.agents import AgentConfig
    from agents_app.runtime.offline import OfflineModel
    from agents_app.runtime.runner import Runner
    from sessions_app import services as session_services

    user = person()
    session = session_services.session_create(app_name=APP, user_id=str(user.pk))
    runner = Runner(
        agent=AgentConfig(app_name=APP, model="offline"), model=OfflineModel(chunk_delay=0)
    )
    message = types.Content(role="user", parts=[types.Part(text=f"Remember that {text}")])

    async def said():
        return [
            event
            async for event in runner.run_async(
                user_id=str(user.pk), session_id=session.id, new_message=message
            )
        ]

    events = async_to_sync(said)()
    return Outcome(saved=_active(user), answer=events[-1].text() if events else "")


def door_create_memory(text: str) -> Outcome:
    from agents_app.memory_provider import DjangoMemoryProvider
    from agents_app.runtime.tools import ToolContext
    from sessions_app import services as session_services
    from sessions_app.events import Event, new_invocation_id

    user = person()
    session = session_services.session_create(app_name=APP, user_id=str(user.pk))
    invocation_id = new_invocation_id()
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=invocation_id,
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=f"Remember that {text}")]),
        ),
    )
    tool = {each.name: each for each in DjangoMemoryProvider().tools()}["create_memory"]
    context = ToolContext(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        invocation_id=invocation_id,
        agent_name="assistant",
        state={},
        memory_enabled=True,
    )
    answer = async_to_sync(tool.run)({"text": text, "asked": True}, context)
    return Outcome(saved=_active(user), answer=json.dumps(answer, ensure_ascii=False))


def _mcp_principal(user):
    from access_app.services import access_token_create
    from agents_app.mcp_server import Principal

    issued = access_token_create(user=user, name="bench", scopes=["read", "write"])
    return Principal(app_name=APP, user_pk=user.pk, can_write=True, token=issued.record)


def door_mcp_add(text: str) -> Outcome:
    from agents_app import mcp_server
    from agents_app.mcp_server import ToolError

    user = person()
    try:
        answer = async_to_sync(mcp_server._add)(_mcp_principal(user), text, "")
    except ToolError as error:
        answer = f"error: {error}"
    return Outcome(saved=_active(user), answer=str(answer))


def door_mcp_correct(text: str) -> Outcome:
    from agents_app import mcp_server
    from agents_app.mcp_server import ToolError

    user = person()
    memory = _first_memory(user)
    try:
        answer = async_to_sync(mcp_server._correct)(_mcp_principal(user), str(memory.id), text)
    except ToolError as error:
        answer = f"error: {error}"
    return Outcome(saved=_corrected(user, memory), answer=str(answer))


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def door_rest_correct(text: str) -> Outcome:
    user = person()
    memory = _first_memory(user)
    response = _signed_in(user).post(
        f"/api/memories/{memory.id}/correct/",
        json.dumps({"text": text}),
        content_type="application/json",
    )
    return Outcome(
        saved=_corrected(user, memory), answer=f"{response.status_code} {response.content[:300]!r}"
    )


def _page_message(response) -> str:
    if not response.context:
        return ""
    return " | ".join(str(message) for message in response.context["messages"])


def door_page_add(text: str) -> Outcome:
    user = person()
    response = _signed_in(user).post("/memory/add/", {"text": text}, follow=True)
    return Outcome(saved=_active(user), answer=_page_message(response))


def door_page_correct(text: str) -> Outcome:
    user = person()
    memory = _first_memory(user)
    response = _signed_in(user).post(f"/memory/{memory.id}/correct/", {"text": text}, follow=True)
    groups = response.context.get("groups") or [] if response.context else []
    reasons = [item.refused_reason for _, items in groups for item in items if item.refused_reason]
    return Outcome(
        saved=_corrected(user, memory),
        answer=f"{response.status_code} {' | '.join(reasons) or _page_message(response)}",
    )


def _service_client() -> Client:
    from agents_app.services import app_ensure, service_account_create

    app, _ = app_ensure(name=APP)
    issued = service_account_create(app=app, name=f"bench-{uuid.uuid4().hex[:8]}")
    return Client(HTTP_AUTHORIZATION=f"Bearer {issued.key}")


def door_service_api(text: str) -> Outcome:
    from agents_app.models import EndUser

    external = f"guard-{uuid.uuid4().hex[:10]}"
    response = _service_client().post(
        f"/api/v1/apps/{APP}/users/{external}/memories/",
        json.dumps({"text": text}),
        content_type="application/json",
    )
    end_user = EndUser.objects.filter(external_id=external).first()
    saved = end_user is not None and _active(end_user.user)
    return Outcome(saved=saved, answer=f"{response.status_code} {response.content[:300]!r}")


def door_app_memory(text: str) -> Outcome:
    from memory_app.models import Memory, MemoryScope

    shared = Memory.objects.filter(app_name=APP, scope=MemoryScope.APP, status="active")
    before = set(shared.values_list("pk", flat=True))
    response = _service_client().post(
        f"/api/v1/apps/{APP}/memories/", json.dumps({"text": text}), content_type="application/json"
    )
    after = set(shared.values_list("pk", flat=True))
    return Outcome(
        saved=bool(after - before), answer=f"{response.status_code} {response.content[:300]!r}"
    )


def door_file(text: str) -> Outcome:
    from agents_app.runtime.attachments import attachment_parts, attachments_metadata
    from memory_app import selectors as memory_selectors
    from memory_app import services as memory_services
    from sessions_app import services as session_services
    from sessions_app.events import Event, new_invocation_id
    from sessions_app.uploads import uploads_check

    user = person()
    session = session_services.session_create(app_name=APP, user_id=str(user.pk))
    records = session_services.attachments_store(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        uploads=uploads_check([("notes.txt", text.encode("utf-8"))]),
    )
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=new_invocation_id(),
            author="user",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(text="Remember this file"),
                    *attachment_parts(records, session_id=session.id),
                ],
            ),
            custom_metadata={"attachments": attachments_metadata(records)},
        ),
    )
    key = memory_selectors.memory_session_key(app_name=APP, user_pk=user.pk, session_id=session.id)
    job = memory_services.memory_job_request(
        app_name=APP, user_pk=user.pk, session_id=key, trigger="explicit", enqueue=False
    )
    job = memory_services.memory_job_run(job_id=str(job.id))
    from memory_app.models import Memory

    reasons = list(Memory.objects.filter(user=user).values_list("review_reason", flat=True))
    return Outcome(saved=_active(user), answer=f"job {job.status}; {reasons}")


DOORS: dict[str, Callable[[str], Outcome]] = {
    "chat": door_chat,
    "create_memory": door_create_memory,
    "mcp_add": door_mcp_add,
    "mcp_correct": door_mcp_correct,
    "rest_correct": door_rest_correct,
    "page_add": door_page_add,
    "page_correct": door_page_correct,
    "service_api": door_service_api,
    "app_memory": door_app_memory,
    "file": door_file,
}


def measure(doors: list[str], limit: int | None, show: bool) -> None:
    corpus = corpus_load()
    hostile = corpus["hostile"][:limit]
    ordinary = corpus["ordinary"][:limit]
    print(f"{len(hostile)} hostile texts, {len(ordinary)} ordinary facts")
    print(f"{'door':<14} {'hostile refused':>18} {'ordinary kept':>16}")
    for name in doors:
        door = DOORS[name]
        outcomes = {entry["text"]: door(entry["text"]) for entry in hostile}
        refused = [entry for entry in hostile if not outcomes[entry["text"]].saved]
        kept = [entry for entry in ordinary if door(entry["text"]).saved]
        print(
            f"{name:<14} {len(refused):>4}/{len(hostile)} {len(refused) / len(hostile):>7.1%}"
            f"   {len(kept):>4}/{len(ordinary)} {len(kept) / len(ordinary):>6.1%}",
            flush=True,
        )
        if show:
            first = hostile[0]["text"]
            print(f"    answer to {first[:40]!r}: {outcomes[first].answer}")
            for entry in hostile:
                if entry not in refused:
                    print(f"    passed ({entry['kind']}): {entry['text'][:100]!r}")
            for entry in ordinary:
                if entry not in kept:
                    print(f"    refused: {entry['text'][:100]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--doors", default=",".join(DOORS), help="comma-separated door names")
    parser.add_argument("--limit", type=int, default=None, help="first N texts of each list")
    parser.add_argument("--show", action="store_true", help="list what each door got wrong")
    args = parser.parse_args()
    doors = [name for name in args.doors.split(",") if name]
    unknown = sorted(set(doors) - set(DOORS))
    if unknown:
        parser.error(f"unknown doors: {', '.join(unknown)}; known: {', '.join(DOORS)}")
    logging.disable(logging.WARNING)
    setup_test_environment()
    settings.MEMORY_EMBEDDER = "none"
    settings.GEMINI_API_KEY = ""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    old_name = connection.settings_dict["NAME"]
    # A database of its own, apart from the test suite's (which may be running meanwhile).
    connection.settings_dict.setdefault("TEST", {})["NAME"] = (
        str(Path(settings.BASE_DIR) / "build" / "bench-memory-guard.sqlite3")
        if connection.vendor == "sqlite"
        else f"test_{old_name}_memory_guard"
    )
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        measure(doors, args.limit, args.show)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
