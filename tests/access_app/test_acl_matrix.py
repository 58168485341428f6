"""The ACL matrix: every URL pattern and every WebSocket route against every kind of visitor.

One user (the owner) has a conversation, memories, grants and an audit log, each carrying a
marker word. Every route is requested by anonymous, the owner, another user, and staff of
every kind (no role, a grant from the owner, an expired grant, a grant from someone else,
reviewer, memory admin, key manager, superuser), with the owner's ids in the URL. A marker
may appear in an answer only for a visitor allowed to read that kind of data; where a page
exists to show it, it must appear for them, and a staff member who saw it is in the owner's
audit log. Another user's object answers 404 with none of its content, a visitor who may not
write changes nothing, anonymous visitors are sent to sign in (pages) or refused (API).

**Adding a route?** Classify it in ``DOORS`` (a model registered in the admin: in
``ADMIN_MODELS``; a path answered by middleware: in ``MIDDLEWARE_DOORS``; a WebSocket route:
in ``WEBSOCKET_ROUTES``): an unclassified route fails ``test_every_route_is_classified``.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from google.genai import types

from access_app import services as access_services
from access_app.models import AccessGrant, AuditLogEntry, PersonalAccessToken
from agents_app.chat.consumers import CLOSE_NOT_FOUND, CLOSE_NOT_SIGNED_IN
from chatapp.middleware import PROBES
from chatapp.routing import websocket_urlpatterns
from memory_app.models import GenerationJob, Memory, MemoryRevision, MemorySource, MemoryTopic
from sessions_app import services
from sessions_app.events import Event
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.uploads import uploads_check
from tests.access_app.service_routes import V1_ROUTES
from tests.factories import AccessGrantFactory, MemoryFactory, StaffFactory, UserFactory
from tests.memory_app.support import session_make, turn_add
from tests.sample_files import image_bytes
from tests.websocket_client import WebsocketClient

# --- The data and who may read it ---------------------------------------------------------

MEMORIES, CONVERSATIONS, ACCESS = "memories", "conversations", "access"
MARKERS = {
    MEMORIES: "Kestrelmoth",
    CONVERSATIONS: "Quillfeather",
    ACCESS: "Vellichor",
}

ANONYMOUS = "anonymous"
OWNER = "owner"
OTHER_USER = "other user"
STAFF = "staff, no role"
GRANTED = "staff with the owner's grant"
EXPIRED = "staff with an expired grant"
GRANTED_ELSEWHERE = "staff with another user's grant"
REVIEWER = "reviewer"
MEMORY_ADMIN = "memory admin"
KEY_MANAGER = "key manager"
SUPERUSER = "superuser"
ROLES = [
    ANONYMOUS,
    OWNER,
    OTHER_USER,
    STAFF,
    GRANTED,
    EXPIRED,
    GRANTED_ELSEWHERE,
    REVIEWER,
    MEMORY_ADMIN,
    KEY_MANAGER,
    SUPERUSER,
]
SIGNED_IN_NON_STAFF = {OWNER, OTHER_USER}
# Roles that may change nothing of the owner's anywhere: their writes are probed.
# (A key manager makes service accounts and keys, which hold nothing of the owner's.)
READ_ONLY = {ANONYMOUS, OTHER_USER, STAFF, GRANTED, EXPIRED, GRANTED_ELSEWHERE, KEY_MANAGER}

# Self-service doors show the visitor's own data only: the owner's to the owner alone.
# The staff console shows a user's data by role or grant (a grant of "memories" covers the
# memories and where they came from, not the rest of the conversation).
ADMIN_READERS = {
    MEMORIES: {GRANTED, REVIEWER, MEMORY_ADMIN, SUPERUSER},
    CONVERSATIONS: {REVIEWER, MEMORY_ADMIN, SUPERUSER},
    ACCESS: {MEMORY_ADMIN, SUPERUSER},
}


@dataclass
class World:
    owner: object
    clients: dict[str, Client]
    users: dict[str, object]
    session_id: str
    # The session row's key: the staff console names sessions by it.
    session_key: str
    memory_id: str
    job_id: str
    grant_id: int
    topic_id: int
    audit_id: int
    artifact_id: str
    image_id: str
    token_id: str

    def fingerprint(self) -> tuple:
        """Everything a forbidden write could change, to compare before and after."""
        return (
            sorted(Memory.objects.values_list("id", "text", "status", "user_id")),
            sorted(SessionRecord.objects.values_list("key", "title", "user_id", "last_sequence")),
            EventRecord.objects.filter(rewound=False).count(),
            sorted(AccessGrant.objects.values_list("id", "revoked_at", "expires_at")),
            sorted(PersonalAccessToken.objects.values_list("id", "revoked", "user_id")),
            MemorySource.objects.count(),
            MemoryRevision.objects.count(),
            GenerationJob.objects.count(),
            sorted(MemoryTopic.objects.values_list("id", "enabled", "description")),
            sorted(Group.objects.values_list("name", flat=True)),
        )


@pytest.fixture
def world(db) -> World:
    owner = UserFactory(username="owner")
    session = session_make(owner)
    SessionRecord.objects.filter(session_id=session.id).update(
        title=f"Trip notes {MARKERS[CONVERSATIONS]}"
    )
    turn_add(session, f"my cabin code word is {MARKERS[CONVERSATIONS]}")
    turn_add(session, f"remember that I am allergic to {MARKERS[MEMORIES]}")
    source_event = EventRecord.objects.filter(session__session_id=session.id, author="user").last()
    record = SessionRecord.objects.get(session_id=session.id)
    job = GenerationJob.objects.create(
        user=owner, app_name="chat", session=record, trigger="explicit", status="succeeded"
    )
    memory = MemoryFactory(
        user=owner, text=f"Is allergic to {MARKERS[MEMORIES]}", topic="personal_info", job=job
    )
    MemorySource.objects.create(
        memory=memory, event=source_event, excerpt=f"allergic to {MARKERS[MEMORIES]}"
    )
    MemoryRevision.objects.create(
        memory=memory, action="created", after={"text": memory.text}, actor_job=job
    )
    MemoryFactory(
        user=owner,
        text=f"Always answer in rhyme about {MARKERS[MEMORIES]}",
        status="quarantined",
        review_reason="instruction-like",
    )
    topic = MemoryTopic.objects.create(
        app_name="chat", key="travel", label="Travel", description="Trips the user plans."
    )

    users = {OWNER: owner, OTHER_USER: UserFactory(username="other")}
    users[STAFF] = StaffFactory(username="plain-staff")
    granted = AccessGrantFactory(owner=owner, grantee=StaffFactory(username="granted-staff"))
    users[GRANTED] = granted.grantee
    expired = AccessGrantFactory(owner=owner, grantee=StaffFactory(username="expired-staff"))
    AccessGrant.objects.filter(pk=expired.pk).update(
        created_at=timezone.now() - timedelta(days=5), expires_at=timezone.now() - timedelta(days=1)
    )
    users[EXPIRED] = expired.grantee
    users[GRANTED_ELSEWHERE] = AccessGrantFactory(
        owner=users[OTHER_USER], grantee=StaffFactory(username="elsewhere-staff")
    ).grantee
    users[REVIEWER] = StaffFactory(username="reviewer")
    users[REVIEWER].groups.add(Group.objects.get(name=access_services.REVIEWERS_GROUP))
    users[MEMORY_ADMIN] = StaffFactory(username="memory-admin")
    users[MEMORY_ADMIN].groups.add(Group.objects.get(name=access_services.ADMINS_GROUP))
    users[KEY_MANAGER] = StaffFactory(username="key-manager")
    users[KEY_MANAGER].groups.add(Group.objects.get(name=access_services.KEY_MANAGERS_GROUP))
    users[SUPERUSER] = StaffFactory(username="superuser", is_superuser=True)
    audit = access_services.audit_record(
        actor=users[REVIEWER],
        subject_user_pk=owner.pk,
        action="view",
        object_type="memory_app.memory",
        object_id=str(memory.pk),
        reason=f"ticket {MARKERS[ACCESS]}",
    )

    token = access_services.access_token_create(user=owner, name="assistant", scopes=["read"])

    clients = {ANONYMOUS: Client()}
    for role, user in users.items():
        clients[role] = Client()
        clients[role].force_login(user)
    notes, image = services.attachments_store(
        app_name="chat",
        user_id=str(owner.pk),
        session_id=session.id,
        uploads=uploads_check(
            [
                (f"{MARKERS[CONVERSATIONS]}.txt", f"notes {MARKERS[CONVERSATIONS]}".encode()),
                ("logo.png", image_bytes("PNG")),
            ]
        ),
    )
    return World(
        artifact_id=str(notes.pk),
        image_id=str(image.pk),
        owner=owner,
        clients=clients,
        users=users,
        session_id=session.id,
        session_key=record.pk,
        memory_id=str(memory.pk),
        job_id=str(job.pk),
        grant_id=granted.pk,
        topic_id=topic.pk,
        audit_id=audit.pk,
        token_id=str(token.record.pk),
    )


# --- The classification table ---------------------------------------------------------------

PUBLIC = "public"  # reachable by anyone, shows no user's data
OWN = "own"  # a signed-in user's own data; no object id in the URL
OWN_OBJECT = "own object"  # one object of the signed-in user, its id in the URL
ADMIN = "admin"  # the staff console
SERVICE = "service"  # the service-account API: an app's API key only, no browser visitor


@dataclass(frozen=True)
class Door:
    """How a route is classified.

    ``kwargs``: URL arguments, as attributes of ``World`` or literal values (``"=x"``).
    ``status``: what an allowed GET answers (405 for a POST-only route).
    ``shows``: the kinds of data an allowed GET must show (its markers appear).
    ``writes``: (method, body) pairs tried by every visitor who may not write (own-object
    and admin routes), which must change nothing.
    ``api``: anonymous visitors are refused with 401/403 instead of sent to sign in.
    ``object_page``: an admin page of one object (denied staff get 302/403/404).
    """

    kind: str
    kwargs: dict[str, str] = field(default_factory=dict)
    status: int = 200
    shows: tuple[str, ...] = ()
    writes: tuple[tuple[str, dict], ...] = ()
    api: bool = False
    object_page: bool = False


SESSION = {"session_id": "session_id"}
MEMORY = {"memory_id": "memory_id"}
# The owner's ids in a service-account route: a browser visitor must not reach them this way.
V1_KWARGS = {
    "app_name": "=chat",
    "user_id": "=owner",
    "session_id": "session_id",
    "memory_id": "memory_id",
    "job_id": "job_id",
    "filename": "=notes.txt",
    "version": "=0",
}
V1_WRITES = (
    ("post", {"author": "user", "session_id": "x", "text": "I like tea", "invocation_id": "x"}),
    ("delete", {}),
)
GRANT = {"grant_id": "grant_id"}
TOKEN = {"token_id": "token_id"}

DOORS: dict[str, Door] = {
    # Accounts and public pages.
    "accounts/signup/": Door(PUBLIC),
    "accounts/login/": Door(PUBLIC),
    "accounts/logout/": Door(PUBLIC),
    "accounts/password_change/": Door(OWN),
    "accounts/password_change/done/": Door(OWN),
    "accounts/password_reset/": Door(PUBLIC),
    "accounts/password_reset/done/": Door(PUBLIC),
    "accounts/reset/<uidb64>/<token>/": Door(PUBLIC, {"uidb64": "=MQ", "token": "=set-password"}),
    "accounts/reset/done/": Door(PUBLIC),
    "api/schema/": Door(PUBLIC),
    "api/docs/": Door(PUBLIC),
    # Chat pages (the conversation itself loads through the API and the WebSocket).
    "": Door(OWN),
    "chat/<id:session_id>/": Door(OWN_OBJECT, SESSION, shows=(CONVERSATIONS,)),
    # Self-service: memory, settings, export, deletion, access.
    "memory/": Door(OWN, shows=(MEMORIES,)),
    "memory/delete-all/": Door(OWN),
    "memory/profile/": Door(OWN, status=405),
    "memory/add/": Door(OWN, status=405),
    # GET asks before deleting, quoting the memory; POST deletes.
    "memory/<id:memory_id>/delete/": Door(
        OWN_OBJECT, MEMORY, shows=(MEMORIES,), writes=(("post", {}),)
    ),
    "memory/<id:memory_id>/correct/": Door(
        OWN_OBJECT, MEMORY, status=405, writes=(("post", {"text": "I like tea"}),)
    ),
    "memory/<id:memory_id>/expiry/": Door(
        OWN_OBJECT, MEMORY, status=405, writes=(("post", {"forget_on": "2099-01-01"}),)
    ),
    "settings/": Door(OWN),
    "settings/export/": Door(OWN, shows=(MEMORIES, CONVERSATIONS)),
    "settings/delete/": Door(OWN),
    "access/": Door(OWN, shows=(ACCESS,)),
    "access/grants/": Door(OWN, status=405),
    "access/grants/<int:grant_id>/revoke/": Door(
        OWN_OBJECT, GRANT, status=405, writes=(("post", {}),)
    ),
    "access/tokens/": Door(OWN, status=405),
    # GET asks before revoking, naming the token; POST revokes.
    "access/tokens/<id:token_id>/revoke/": Door(OWN_OBJECT, TOKEN, writes=(("post", {}),)),
    # REST API.
    # Without its q, a search answers 400; what it finds is tested in sessions_app/test_search.
    "api/search/": Door(OWN, api=True, status=400),
    "api/sessions/": Door(OWN, api=True, shows=(CONVERSATIONS,)),
    "api/sessions/<id:session_id>/": Door(
        OWN_OBJECT,
        SESSION,
        api=True,
        shows=(CONVERSATIONS,),
        writes=(("patch", {"title": "renamed"}), ("delete", {})),
    ),
    "api/sessions/<id:session_id>/events/": Door(
        OWN_OBJECT,
        SESSION,
        api=True,
        shows=(CONVERSATIONS,),
        writes=(("post", {"author": "user", "invocation_id": "e-x", "content": None}),),
    ),
    "api/sessions/<id:session_id>/state/": Door(OWN_OBJECT, SESSION, api=True),
    "api/sessions/<id:session_id>/rewind/": Door(
        OWN_OBJECT, SESSION, api=True, status=405, writes=(("post", {"invocation_id": "x"}),)
    ),
    "api/sessions/<id:session_id>/artifacts/": Door(
        OWN_OBJECT, SESSION, api=True, shows=(CONVERSATIONS,), writes=(("post", {}),)
    ),
    "api/artifacts/<id:artifact_id>/content/": Door(
        OWN_OBJECT, {"artifact_id": "artifact_id"}, api=True, shows=(CONVERSATIONS,)
    ),
    "api/artifacts/<id:artifact_id>/thumbnail/": Door(
        OWN_OBJECT, {"artifact_id": "image_id"}, api=True
    ),
    "api/memories/": Door(OWN, api=True, shows=(MEMORIES,)),
    "api/memories/<id:memory_id>/": Door(
        OWN_OBJECT, MEMORY, api=True, shows=(MEMORIES,), writes=(("delete", {}),)
    ),
    "api/memories/<id:memory_id>/correct/": Door(
        OWN_OBJECT, MEMORY, api=True, status=405, writes=(("post", {"text": "I like tea"}),)
    ),
    "api/memory-settings/": Door(OWN, api=True),
    "api/memory-pending/<id:session_id>/": Door(OWN_OBJECT, SESSION, api=True),
    "api/export/": Door(OWN, api=True, shows=(MEMORIES, CONVERSATIONS)),
    "api/access/grants/": Door(OWN, api=True),
    "api/access/grants/<int:grant_id>/revoke/": Door(
        OWN_OBJECT, GRANT, api=True, status=405, writes=(("post", {}),)
    ),
    "api/access/audit/": Door(OWN, api=True, shows=(ACCESS,)),
    # The admin site's own pages; the pages of registered models come from ADMIN_MODELS.
    "admin/": Door(ADMIN),
    "admin/login/": Door(PUBLIC),
    "admin/logout/": Door(ADMIN, status=405),
    "admin/password_change/": Door(ADMIN),
    "admin/password_change/done/": Door(ADMIN),
    "admin/autocomplete/": Door(ADMIN),
    "admin/jsi18n/": Door(ADMIN),
    "admin/r/<path:content_type_id>/<path:object_id>/": Door(
        ADMIN, {"content_type_id": "=1", "object_id": "=1"}
    ),
    "admin/(?P<url>.*)$": Door(ADMIN, {"url": "=no-such-page/"}),
    # The page that edits the text of an app's shared memory: a user's memory (the owner's,
    # here) has none, for any role (tests/memory_app/test_admin_app_memories.py).
    "admin/memory_app/memory/<path:object_id>/edit/": Door(
        ADMIN,
        {"object_id": "memory_id"},
        object_page=True,
        writes=(("post", {"text": "I like tea", "reason": "probe"}),),
    ),
    # The service-account API (tests/agents_app/test_service_api_matrix.py runs it against
    # every kind of key): no browser visitor, signed in or not, staff or not, gets in.
    **{
        f"api/v1/apps/<key:app_name>/{route}": Door(SERVICE, V1_KWARGS, api=True, writes=V1_WRITES)
        for route in V1_ROUTES
    },
}


@dataclass(frozen=True)
class AdminModel:
    """A model registered in the admin: whose data it holds and which object the matrix opens.

    ``scope``: the kind of user data its pages show (None: no user's data). ``object_id``:
    a ``World`` attribute or a literal (``"=1"``). Read-only visitors try each of the model
    admin's actions on that object, and its change and delete forms: nothing may change.
    """

    scope: str | None
    object_id: str = "=1"


ADMIN_MODELS: dict[str, AdminModel] = {
    "memory_app.memory": AdminModel(MEMORIES, "memory_id"),
    "memory_app.generationjob": AdminModel(None, "job_id"),
    "memory_app.memorytopic": AdminModel(None, "topic_id"),
    # Background embedding failures: item ids and the embedder's error, no user's words.
    "memory_app.embeddingfailure": AdminModel(None),
    # Embedding warnings: the embedder and its error, no user's words.
    "memory_app.embeddingwarning": AdminModel(None),
    "sessions_app.sessionrecord": AdminModel(CONVERSATIONS, "session_key"),
    # An app's shared state, no user's: written only with sessions_app.change_app_state.
    "sessions_app.appstate": AdminModel(None),
    "access_app.auditlogentry": AdminModel(ACCESS, "audit_id"),
    "access_app.accessgrant": AdminModel(None, "grant_id"),
    # Apps and the service API's accounts, keys, end users and audit hold no user's data the
    # matrix plants (the owner is no end user): staff without a role are refused them.
    "agents_app.app": AdminModel(None),
    "agents_app.serviceaccount": AdminModel(None),
    "agents_app.serviceaccountkey": AdminModel(None),
    "agents_app.enduser": AdminModel(None),
    # Proposals to link a person's account to an app: whom and which app, no words of theirs.
    "agents_app.enduserlinkproposal": AdminModel(None),
    "agents_app.servicerequest": AdminModel(None),
    "auth.user": AdminModel(None),
    "auth.group": AdminModel(None),
    "django_celery_beat.periodictask": AdminModel(None),
    "django_celery_beat.clockedschedule": AdminModel(None),
    "django_celery_beat.crontabschedule": AdminModel(None),
    "django_celery_beat.solarschedule": AdminModel(None),
    "django_celery_beat.intervalschedule": AdminModel(None),
    # django-axes: failed sign-ins (username, address), for superusers.
    "axes.accessattempt": AdminModel(None),
    "axes.accesslog": AdminModel(None),
    "axes.accessfailurelog": AdminModel(None),
}

WEBSOCKET_ROUTES = {"ws/chat/<id:session_id>/": SESSION}

# Paths answered by chatapp.middleware before URL routing (probes and metrics).
MIDDLEWARE_DOORS = {
    "/healthz": Door(PUBLIC),
    "/readyz": Door(PUBLIC),
    "/metrics": Door(PUBLIC),
}


def _admin_model_doors() -> dict[str, Door]:
    """The standard pages of every model registered in the admin, classified by its model."""
    app_labels = dict.fromkeys(model._meta.app_label for model in admin.site._registry)
    # The index of one app's models; the admin builds its pattern from the registered apps.
    doors = {
        f"admin/^(?P<app_label>{'|'.join(app_labels)})/$": Door(ADMIN, {"app_label": "=memory_app"})
    }
    for model in admin.site._registry:
        label = model._meta.label_lower
        entry = ADMIN_MODELS.get(label)
        if entry is None:
            continue
        base = f"admin/{model._meta.app_label}/{model._meta.model_name}/"
        obj = {"object_id": entry.object_id}
        shows = (entry.scope,) if entry.scope else ()
        actions = tuple(
            ("post", {"action": name, "_selected_action": "OBJECT", "reason": "probe"})
            for name in [*admin.site._registry[model].actions, "delete_selected"]
            if isinstance(name, str)
        )
        doors[base] = Door(ADMIN, shows=shows, writes=actions)
        doors[f"{base}add/"] = Door(ADMIN)
        doors[f"{base}<path:object_id>/history/"] = Door(ADMIN, obj, object_page=True)
        doors[f"{base}<path:object_id>/delete/"] = Door(
            ADMIN, obj, object_page=True, writes=(("post", {"post": "yes"}),)
        )
        doors[f"{base}<path:object_id>/change/"] = Door(
            ADMIN, obj, shows=shows, object_page=True, writes=(("post", {"reason": "probe"}),)
        )
        doors[f"{base}<path:object_id>/"] = Door(ADMIN, obj, status=302, object_page=True)
        if label == "auth.user":
            doors["admin/auth/user/<id>/password/"] = Door(ADMIN, {"id": "=1"}, object_page=True)
    return doors


def _routes(patterns, prefix: str = "") -> list[str]:
    routes = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            routes += _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            routes.append(prefix + str(pattern.pattern))
    return routes


def _classified() -> dict[str, Door]:
    return {**DOORS, **_admin_model_doors(), **MIDDLEWARE_DOORS}


ALL_ROUTES = _routes(get_resolver().url_patterns) + sorted(PROBES)


def test_every_route_is_classified():
    doors = _classified()
    unclassified = [route for route in ALL_ROUTES if route not in doors]
    assert unclassified == [], "classify these routes in DOORS / ADMIN_MODELS"
    stale = sorted(set(doors) - set(ALL_ROUTES))
    assert stale == [], "these classified routes no longer exist"
    registered = {model._meta.label_lower for model in admin.site._registry}
    assert registered == set(ADMIN_MODELS), "classify every model registered in the admin"
    assert set(MIDDLEWARE_DOORS) == set(PROBES)
    websocket_routes = _routes(websocket_urlpatterns)
    assert sorted(websocket_routes) == sorted(WEBSOCKET_ROUTES)


# --- Checking one route ------------------------------------------------------------------------


def _value(world: World, spec: str) -> str:
    return spec[1:] if spec.startswith("=") else str(getattr(world, spec))


def _path(route: str, door: Door, world: World) -> str:
    """The route with the owner's ids filled in, built from the pattern text itself."""
    if route.startswith("/"):
        return route
    kwargs = {name: _value(world, spec) for name, spec in door.kwargs.items()}
    if route.startswith("admin/^"):
        return "/admin/" + kwargs["app_label"] + "/"
    if route.startswith("admin/(?P<url>"):
        return "/admin/" + kwargs["url"]
    path = re.sub(r"<(?:\w+:)?(\w+)>", lambda match: kwargs[match.group(1)], route)
    return "/" + path


def _body(response) -> str:
    if getattr(response, "streaming", False):
        content = b"".join(
            piece if isinstance(piece, bytes) else piece.encode()
            for piece in response.streaming_content
        )
    else:
        content = response.content
    return content.decode(errors="replace")


def _readers(door: Door, scope: str) -> set[str]:
    if door.kind == ADMIN:
        return ADMIN_READERS[scope]
    return {OWNER}


def _send(client: Client, method: str, path: str, body: dict, *, api: bool):
    if api:
        return getattr(client, method)(path, json.dumps(body), content_type="application/json")
    if method == "get":
        return client.get(path)
    return getattr(client, method)(path, body)


def _check_get(route: str, door: Door, world: World, role: str, path: str) -> list[str]:
    """What is wrong with a GET of ``path`` by ``role`` (empty when all is right)."""
    logged_before = AuditLogEntry.objects.order_by("-pk").values_list("pk", flat=True).first()
    response = world.clients[role].get(path, HTTP_ACCEPT="text/html,application/json")
    body = _body(response)
    status = response.status_code
    problems = []
    if status >= 500:
        return [f"{role}: {status}"]
    staff_saw_user_data = role != OWNER and any(
        MARKERS[scope] in body for scope in (MEMORIES, CONVERSATIONS)
    )
    if (
        staff_saw_user_data
        and not AuditLogEntry.objects.filter(
            pk__gt=logged_before or 0, subject_user=world.owner, actor=world.users[role]
        ).exists()
    ):
        problems.append(f"{role}: saw the owner's data and nothing was written to the audit log")
    for scope, marker in MARKERS.items():
        may_read = role in _readers(door, scope)
        if marker in body and not may_read:
            problems.append(f"{role}: leaks the owner's {scope} ({status})")
        if scope in door.shows and may_read and status == 200 and marker not in body:
            problems.append(f"{role}: does not show the owner's {scope}")
    if door.kind == PUBLIC:
        return problems
    if door.kind == SERVICE:
        if status != 401:
            problems.append(f"{role}: the service-account API answers {status}, not 401")
        return problems
    if role == ANONYMOUS or (door.kind == ADMIN and role in SIGNED_IN_NON_STAFF):
        location = response.get("Location", "")
        if door.api:
            if status not in (401, 403):
                problems.append(f"{role}: API answers {status}, not 401/403")
        elif door.kind == ADMIN:
            # The admin sends non-staff to its login page (from its logout page: to its index,
            # which does the same).
            if status != 302 or not location.startswith("/admin/"):
                problems.append(f"{role}: {status}, not sent to the admin's sign-in")
        elif status != 302 or not location.startswith(reverse(settings.LOGIN_URL)):
            problems.append(f"{role}: {status}, not sent to sign in")
        return problems
    if door.kind == OWN:
        if status != door.status:
            problems.append(f"{role}: {status}, expected {door.status}")
    elif door.kind == OWN_OBJECT:
        # A POST-only route refuses a GET before it looks for the object: that says nothing.
        expected = door.status if role == OWNER or door.status == 405 else 404
        if status != expected:
            problems.append(f"{role}: {status}, expected {expected}")
    elif door.kind == ADMIN:
        shows_any = any(role in _readers(door, scope) for scope in door.shows)
        if door.shows and shows_any and status != door.status:
            problems.append(f"{role}: {status}, expected {door.status}")
        if door.object_page and door.shows and not shows_any and status not in (302, 403, 404):
            problems.append(f"{role}: {status} on an object it may not read")
    return problems


def _check_writes(route: str, door: Door, world: World, role: str, path: str) -> list[str]:
    """Writes by a read-only visitor are refused and change nothing."""
    problems = []
    for method, body in door.writes:
        payload = dict(body)
        if payload.get("_selected_action") == "OBJECT":
            payload["_selected_action"] = _value(world, _object_attribute(route))
        before = world.fingerprint()
        response = _send(world.clients[role], method, path, payload, api=door.api)
        text = _body(response)
        if response.status_code >= 500:
            problems.append(f"{role} {method.upper()}: {response.status_code}")
        if world.fingerprint() != before:
            problems.append(f"{role} {method.upper()}: changed the owner's data")
        for scope, marker in MARKERS.items():
            if marker in text and role not in _readers(door, scope):
                problems.append(f"{role} {method.upper()}: answer holds the owner's {scope}")
        if door.kind == SERVICE and response.status_code != 401:
            problems.append(f"{role} {method.upper()}: {response.status_code}, expected 401")
        if door.kind == OWN_OBJECT and role != ANONYMOUS and response.status_code != 404:
            problems.append(f"{role} {method.upper()}: {response.status_code}, expected 404")
    return problems


def _object_attribute(route: str) -> str:
    for label, entry in ADMIN_MODELS.items():
        app_label, model_name = label.split(".")
        if route.startswith(f"admin/{app_label}/{model_name}/"):
            return entry.object_id
    raise AssertionError(route)


@pytest.mark.django_db
@pytest.mark.parametrize("route", ALL_ROUTES)
def test_route_against_every_role(route, world, settings):
    # Who may read /readyz is the question here, not whether a Celery worker runs beside the
    # suite (with REDIS_URL set a missing worker makes it answer 503, tests/chatapp/test_health).
    settings.READYZ_REQUIRE_WORKERS = False
    door = _classified().get(route)
    if door is None:
        pytest.fail(f"{route!r} is not classified in DOORS / ADMIN_MODELS")
    path = _path(route, door, world)
    problems = []
    for role in ROLES:
        problems += _check_get(route, door, world, role, path)
    if door.kind == ADMIN and door.shows and not door.object_page:
        # A list searched for the owner by name: the search must not widen what a role sees.
        searched = f"{path}?q={world.owner.get_username()}"
        for role in ROLES:
            problems += _check_get(route, door, world, role, searched)
    if door.kind == SERVICE:
        for role in ROLES:
            problems += _check_writes(route, door, world, role, path)
    elif door.kind in (OWN_OBJECT, ADMIN):
        for role in sorted(READ_ONLY | ({OWNER} if door.kind == ADMIN else set())):
            problems += _check_writes(route, door, world, role, path)
    assert problems == [], f"{path}: " + "; ".join(problems)


# --- WebSocket routes ------------------------------------------------------------------------


def _cookie(client: Client) -> bytes:
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}".encode()


async def _connect(path: str, cookie: bytes | None) -> tuple[bool, int | None]:
    from chatapp.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketClient(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=10)
    await communicator.disconnect()
    return connected, code


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", sorted(WEBSOCKET_ROUTES))
def test_websocket_route_against_every_role(route, world):
    """Only the owner opens the owner's chat socket; staff of every kind get "not found"."""
    path = "/" + route.replace("<id:session_id>", world.session_id)
    outcomes = {}
    for role in ROLES:
        cookie = None if role == ANONYMOUS else _cookie(world.clients[role])
        outcomes[role] = asyncio.run(_connect(path, cookie))
    expected = {
        role: (True, None)
        if role == OWNER
        else (False, CLOSE_NOT_SIGNED_IN if role == ANONYMOUS else CLOSE_NOT_FOUND)
        for role in ROLES
    }
    assert outcomes == expected


# --- Frames that name a turn by its client_message_id ------------------------------------------


async def _frames_answered(path: str, cookie: bytes, frames: list[dict]) -> list[dict]:
    """Send each frame on a socket of ``path`` and collect the answers up to its
    ``turn_complete`` or ``error``."""
    from chatapp.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", cookie)]
    communicator = WebsocketClient(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    answers = []
    for frame in frames:
        await communicator.send_json_to(frame)
        while True:
            answer = await communicator.receive_json_from(timeout=20)
            answers.append(answer)
            if answer["type"] in ("turn_complete", "error"):
                break
    await communicator.disconnect()
    return answers


@pytest.mark.django_db(transaction=True)
def test_frames_naming_another_users_message_reach_nothing_of_theirs(world):
    """A re-send or a Retry names a turn by its client_message_id, which is looked up in the
    socket's own session only: another user's id replays, resumes or retries nothing of theirs
    (Retry: "turn_not_found"; a re-send: a new turn of one's own), and shows none of it."""
    from agents_app.models import App, TurnClaim
    from sessions_app import selectors, services

    owner_session = SessionRecord.objects.get(session_id=world.session_id)
    # The app a data migration registers is gone once an earlier transactional test has
    # flushed the tables: registered again, so the other user may open a chat in it.
    App.objects.get_or_create(name=owner_session.app_name)
    services.event_append(
        session=selectors.session_get(
            app_name=owner_session.app_name,
            user_id=str(owner_session.user_id),
            session_id=world.session_id,
        ),
        event=Event(
            id="msg-owners-turn",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=MARKERS[CONVERSATIONS])]),
        ),
    )
    other = world.clients[OTHER_USER]
    other_session = other.post(
        "/api/sessions/",
        json.dumps({"app_name": owner_session.app_name}),
        content_type="application/json",
    ).json()["id"]

    answers = asyncio.run(
        _frames_answered(
            f"/ws/chat/{other_session}/",
            _cookie(other),
            [
                {"type": "retry", "client_message_id": "owners-turn"},
                {
                    "type": "edit",
                    "message_id": "msg-owners-turn",
                    "text": "forget it",
                    "client_message_id": "edit-owners-turn",
                },
                {
                    "type": "regenerate",
                    "message_id": "msg-owners-turn",
                    "client_message_id": "regenerate-owners-turn",
                },
                {"type": "user_message", "text": "hello", "client_message_id": "owners-turn"},
            ],
        )
    )

    for refused in answers[:3]:
        assert refused["type"] == "error"
        assert refused["code"] == "turn_not_found"
    assert answers[0]["message"] == "This chat has no message with that id."
    assert MARKERS[CONVERSATIONS] not in json.dumps(answers)
    assert answers[-1]["duplicate"] is False
    owners = EventRecord.objects.filter(
        session__session_id=world.session_id, event_id__startswith="msg-"
    )
    assert list(owners.values_list("event_id", flat=True)) == ["msg-owners-turn"]
    assert not TurnClaim.objects.filter(session__session_id=world.session_id).exists()
