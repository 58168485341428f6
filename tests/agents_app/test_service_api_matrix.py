"""The service-account API's ACL and write-effect matrix: every route against every kind of key.

App ``chat`` has an end user with a session, an event, ``user:`` state, a memory and a file of
the session, each holding a marker word. Each route is requested, with that end user's ids,
by: a key of ``chat`` with every scope (allowed), a key of ``chat`` lacking the route's scope
(403), a key of another app with ``chat`` in the path (404), a key of the other app naming
``chat``'s end user under its own app (another app's end user: nothing of ``chat``'s), a
revoked and an expired key (401). No hostile request may answer with a marker or change
``chat``'s data.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from agents_app.models import ALL_SCOPES, EndUser, ServiceAccountKey
from agents_app.services import app_ensure, end_user_ensure, service_account_create
from memory_app.models import GenerationJob, Memory
from sessions_app import services as session_services
from sessions_app.events import Event
from sessions_app.models import AppState, ArtifactRecord, EventRecord, SessionRecord, UserState
from tests.factories import MemoryFactory, session_key

MARKER = "Zephyrquill"
SCOPE_OF = {
    "users/": "users:admin",
    "users/<key:user_id>/": "users:admin",
    "users/<key:user_id>/export/": "users:admin",
    "users/<key:user_id>/memory/generate/": "memory:write",
    "users/<key:user_id>/memory/events/": "memory:write",
    "users/<key:user_id>/memories/": "memory:write",
    "users/<key:user_id>/memories/search/": "memory:read",
    "users/<key:user_id>/memories/<id:memory_id>/": "memory:write",
    "jobs/<id:job_id>/": "memory:read",
    "memories/": "memory:write",
    "memories/<id:memory_id>/": "memory:write",
    "memory-lifetime/": "memory:write",
}
WRITE_BODY = {
    "author": "mallory",
    "invocation_id": "x",
    "session_id": "s-matrix",
    "text": "I like tea",
    "events": [{"author": "mallory"}],
    "actions": {"state_delta": {"app:owned": True}},
}


def _routes(patterns, prefix: str = "") -> list[str]:
    routes = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            routes += _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            routes.append(prefix + str(pattern.pattern))
    return routes


V1 = "api/v1/apps/<key:app_name>/"
V1_ROUTES = sorted(
    route[len(V1) :] for route in _routes(get_resolver().url_patterns) if route.startswith(V1)
)


def _scope(route: str, method: str) -> str:
    if route.startswith(("memories/", "memory-lifetime/", "users/<key:user_id>/memor")) and (
        method == "get"
    ):
        return "memory:read"
    if route in SCOPE_OF:
        return SCOPE_OF[route]
    return "sessions:read" if method == "get" else "sessions:write"


def _fingerprint() -> tuple:
    """Everything of app ``chat`` a hostile request could change."""
    return (
        sorted(
            SessionRecord.objects.filter(app_name="chat").values_list("session_id", "last_sequence")
        ),
        EventRecord.objects.filter(session__app_name="chat").count(),
        sorted(Memory.objects.filter(app_name="chat").values_list("id", "text", "status")),
        sorted(UserState.objects.filter(app_name="chat").values_list("user_id", "key", "value")),
        sorted(AppState.objects.filter(app_name="chat").values_list("key", "value")),
        sorted(EndUser.objects.filter(app__name="chat").values_list("external_id", flat=True)),
        GenerationJob.objects.filter(app_name="chat").count(),
        sorted(ArtifactRecord.objects.filter(app_name="chat").values_list("filename", "version")),
    )


@pytest.fixture
def world(db):
    chat, _ = app_ensure(name="chat")
    other, _ = app_ensure(name="other")
    end_user = end_user_ensure(app=chat, external_id="enduser-1")
    session = session_services.session_create(
        app_name="chat",
        user_id=str(end_user.user_id),
        session_id="s-matrix",
        state={"user:secret": MARKER},
    )
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id="i1",
            author="user",
            content={"role": "user", "parts": [{"text": f"my password is {MARKER}"}]},
        ),
    )
    memory = MemoryFactory(user=end_user.user, app_name="chat", text=f"Likes {MARKER}")
    session_services.artifact_save(
        app_name="chat",
        user_id=str(end_user.user_id),
        session_id="s-matrix",
        filename="notes.txt",
        artifact={"text": f"Notes on {MARKER}"},
    )
    session_services.artifact_save(
        app_name="chat",
        user_id=str(end_user.user_id),
        session_id="s-matrix",
        filename="user:notes.txt",
        artifact={"text": f"The end user's own notes on {MARKER}"},
    )
    job = GenerationJob.objects.create(
        user=end_user.user, app_name="chat", session_id=session_key(session), trigger="manual"
    )
    keys = {"own": service_account_create(app=chat, name="own").key}
    keys["other app"] = service_account_create(app=other, name="theirs").key
    revoked = service_account_create(app=chat, name="revoked")
    ServiceAccountKey.objects.filter(pk=revoked.record.pk).update(revoked=True)
    keys["revoked"] = revoked.key
    expired = service_account_create(app=chat, name="expired")
    ServiceAccountKey.objects.filter(pk=expired.record.pk).update(
        expiry_date=timezone.now() - timedelta(minutes=1)
    )
    keys["expired"] = expired.key
    ids = {"user_id": "enduser-1", "session_id": "s-matrix", "memory_id": str(memory.pk)}
    ids |= {"job_id": str(job.pk), "filename": "notes.txt", "version": "0"}
    return {"keys": keys, "ids": ids, "chat": chat}


def _path(route: str, app: str, ids: dict) -> str:
    if route.startswith("users/<key:user_id>/artifacts/"):
        ids = {**ids, "filename": "user:notes.txt"}  # the end user's own files
    return f"/api/v1/apps/{app}/" + re.sub(
        r"<(?:\w+:)?(\w+)>", lambda match: ids[match.group(1)], route
    )


def _body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def _request(key: str, method: str, path: str):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    if method == "get":
        return client.get(path)
    if method == "post" and path.endswith("/artifacts/"):  # a save is multipart, as uploads are
        upload = SimpleUploadedFile("notes.txt", b"Overwritten by mallory", "text/plain")
        return client.post(path, {"filename": "user:notes.txt", "file": upload, "text": "true"})
    return getattr(client, method)(path, json.dumps(WRITE_BODY), content_type="application/json")


def test_every_service_route_is_in_the_matrix():
    assert V1_ROUTES, "no service-account route found"
    assert set(SCOPE_OF) <= set(V1_ROUTES)


@pytest.mark.parametrize("route", V1_ROUTES)
def test_service_route_against_every_key(route, world):
    ids, keys, problems = world["ids"], world["keys"], []
    for method in ("get", "post", "patch", "delete"):
        scope = _scope(route, method)
        narrow = service_account_create(
            app=world["chat"],
            name=f"narrow-{method}",
            scopes=[s for s in ALL_SCOPES if s != scope],
        ).key
        hostile = {
            "revoked": (keys["revoked"], "chat", {401}),
            "expired": (keys["expired"], "chat", {401}),
            "missing scope": (narrow, "chat", {403, 405}),
            "another app's key": (keys["other app"], "chat", {404, 405}),
            "another app's end user": (keys["other app"], "other", None),
        }
        for name, (key, app, expected) in hostile.items():
            before = _fingerprint()
            response = _request(key, method, _path(route, app, ids))
            status = response.status_code
            if status >= 500:
                problems.append(f"{name} {method}: {status}")
            if expected is not None and status not in expected:
                problems.append(f"{name} {method}: {status}, expected {sorted(expected)}")
            if MARKER in _body(response):
                problems.append(f"{name} {method}: answered with the end user's data")
            after = _fingerprint()
            if after != before:
                problems.append(f"{name} {method}: changed data")
    own = _request(keys["own"], "get", _path(route, "chat", ids))
    if own.status_code in (401, 403) or own.status_code >= 500:
        problems.append(f"own key get: {own.status_code}")
    if route.endswith("artifacts/<key:filename>/versions/<id:version>/") and MARKER not in _body(
        own
    ):
        problems.append(f"own key get: the file was not reached ({own.status_code})")
    assert problems == [], f"{route}: " + "; ".join(problems)
