"""REST fuzzing of the service-account API (``/api/v1/``) with a valid key, two apps apart.

Every ``/api/v1/`` operation of the OpenAPI schema, driven by schemathesis with every check
it has, as app A's service account with a key of every scope: whatever it sends, the API must
answer without a 5xx and as its schema says, accept what the schema allows and refuse what it
does not, and enforce the key (schemathesis also sends no key and a wrong one). App A and app
B each have an end user named ``ada`` (two people: one per app), a session with events and
state, a memory and a shared memory, each holding the app's word; the generated path
parameters are A's real objects a third of the time, B's a third (app name, session, memory
and job ids), made up the rest. No answer to A's key may hold anything of B's: its word, its
ids or its name.

Bounded and derandomised like the browser users' run (tests/chatapp/test_api_fuzz.py):
``FUZZ_SERVICE_EXAMPLES`` examples per operation (20 by default).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from agents_app.services import app_ensure, end_user_ensure, service_account_create
from memory_app.models import GenerationJob
from memory_app.services.app_memories import app_memory_create
from sessions_app import services
from sessions_app.events import Event, EventActions
from tests.factories import MemoryFactory, session_key
from tests.served_schema import served_schema

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("requests_in_the_test_transaction"),
    pytest.mark.timeout(900),
]

EXAMPLES = int(os.environ.get("FUZZ_SERVICE_EXAMPLES", "20"))
END_USER = "ada"
TENANTS = {
    "a": {
        "app_name": "fuzz-app-arbor",
        "session_id": "arbor-session-5d1e",
        "memory_id": "3e6f8a10-2b4c-4d5e-8f70-a1b2c3d4e5f6",
        "app_memory_word": "Tindlewren",
        "job_id": "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d",
        "word": "Marmalwick",
    },
    "b": {
        "app_name": "fuzz-app-birch",
        "session_id": "birch-session-8c4a",
        "memory_id": "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f",
        "app_memory_word": "Gossamund",
        "job_id": "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b",
        "word": "Quillobrant",
    },
}
PATH_IDS = ("app_name", "user_id", "session_id", "memory_id", "job_id")

# Failures show the values sent (everything here is test data). No NUL character is drawn: the
# API refuses one in any string at any depth (PostgreSQL's text cannot hold it), which every
# operation's 400 states, and JSON Schema can say so of a string but not of a free-form JSON
# value (state, custom metadata) without a recursive schema the generators cannot draw from;
# tests/chatapp/test_api_refusals.py sends NUL characters and checks the refusal.
CONFIG = SchemathesisConfig.from_dict(
    {"output": {"sanitization": {"enabled": False}}, "generation": {"allow-x00": False}}
)
schema = served_schema(CONFIG).include(path_regex=r"^/api/v1/")
_key: dict[str, str] = {}
# Cases are made when the test is collected, before any key exists: they carry this stand-in,
# which the test swaps for app A's key of the run.
KEY_TO_COME = "key-to-come"


def _ids_of(tenant: str) -> dict[str, str]:
    return {**{name: TENANTS[tenant].get(name, "") for name in PATH_IDS}, "user_id": END_USER}


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    """A third of the ids are app A's real objects (its app name, its end user, session,
    memory, job), a third app B's, the rest as generated."""
    path = context.operation.path
    names = [name for name in PATH_IDS if f"{{{name}}}" in path]
    if not names:
        return st.just(path_parameters)
    generated = path_parameters or {}
    own = {name: _ids_of("a")[name] for name in names}
    theirs = {name: _ids_of("b")[name] for name in names}
    return st.sampled_from([generated, {**generated, **own}, {**generated, **theirs}])


@schema.hook
def before_generate_body(context, strategy):
    """Rewinds, memory generation and memory events also name app A's real session and
    invocations."""
    path = context.operation.path
    session_id = TENANTS["a"]["session_id"]
    if path.endswith("/rewind/"):
        real = st.sampled_from([{"invocation_id": value} for value in ("inv-1", "inv-2")])
        return st.one_of(strategy, real)
    if path.endswith("/memory/generate/"):
        return st.one_of(strategy, st.just({"session_id": session_id}))
    if path.endswith("/memory/events/"):
        event = {"author": "user", "invocation_id": "inv-3"}
        return st.one_of(strategy, st.just({"session_id": session_id, "events": [event]}))
    return strategy


@schema.auth()
class AppKey:
    """App A's key, of every scope, on every generated request."""

    def get(self, case, context) -> str:
        return _key.get("a", KEY_TO_COME)

    def set(self, case, data: str, context) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


def _plant(tenant: str) -> str:
    """The tenant's app, a key of every scope, its end user ``ada`` with a session (two
    invocations, state of every scope), a memory, a generation job and a shared memory, each
    holding the tenant's word; the key."""
    data = TENANTS[tenant]
    app, _ = app_ensure(name=data["app_name"])
    issued = service_account_create(app=app, name=f"fuzz-{tenant}")
    account = end_user_ensure(app=app, external_id=END_USER).user
    session = services.session_create(
        app_name=app.name,
        user_id=str(account.pk),
        session_id=data["session_id"],
        state={"note": data["word"], "user:nick": data["word"], "app:motto": data["word"]},
    )
    for invocation_id in ("inv-1", "inv-2"):
        services.event_append(
            session=session,
            event=Event(
                invocation_id=invocation_id,
                author="user",
                content={"role": "user", "parts": [{"text": f"my word is {data['word']}"}]},
                actions=EventActions(state_delta={"step": invocation_id}),
            ),
        )
    MemoryFactory(
        id=data["memory_id"], app_name=app.name, user=account, text=f"Word: {data['word']}."
    )
    GenerationJob.objects.create(
        id=data["job_id"],
        user=account,
        app_name=app.name,
        session_id=session_key(session),
        trigger=GenerationJob.Trigger.SESSION_END,
    )
    app_memory_create(app_name=app.name, text=f"The app's word is {data['app_memory_word']}.")
    return issued.key


def _secrets_of(tenant: str) -> list[str]:
    data = TENANTS[tenant]
    names = ("app_name", "session_id", "memory_id", "job_id", "word", "app_memory_word")
    return [data[name] for name in names]


@pytest.fixture
def two_apps():
    """Apps A and B with their data; A's key is the one every request carries."""
    _key["a"] = _plant("a")
    _plant("b")
    yield
    _key.clear()


# Checks left out where the server's rules go beyond what the schema can say, which these
# checks then report at random, by the examples drawn. Every operation: a request the schema
# allows may still be refused with a documented 400 (a session memory without its session, a
# file of a type that cannot be attached, an event id over 128 characters, a partial event, an
# empty upload), so the acceptance of schema-valid data is not checked. An append: it takes
# user ids beyond the schema's pattern and genai enum values the schema does not list
# (google-genai accepts unknown ones). Every other check runs on every operation; writing those
# rules into the schema is left to do (the closing note of stop 34).
RULES_BEYOND_THE_SCHEMA = [positive_data_acceptance]
SCHEMA_MISMATCHES = {
    ("POST", "/api/v1/apps/{app_name}/users/{user_id}/sessions/{session_id}/events/"): [
        negative_data_rejection
    ],
}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_service_operation_answers_as_documented_and_never_shows_another_app(case, two_apps):
    if (case.headers or {}).get("Authorization") == f"Bearer {KEY_TO_COME}":
        case.headers["Authorization"] = f"Bearer {_key['a']}"
    known_mismatch = SCHEMA_MISMATCHES.get((case.method, case.operation.path), [])
    response = case.call_and_validate(excluded_checks=[*RULES_BEYOND_THE_SCHEMA, *known_mismatch])

    # An answer may repeat what the request named (a 404 names the app asked for), no more.
    sent = response.request.url + str(response.request.body)
    leaked = [
        secret
        for secret in _secrets_of("b")
        if secret.encode() in response.content and secret not in sent
    ]
    assert leaked == [], f"{case.method} {case.formatted_path} showed app B's {leaked}"
