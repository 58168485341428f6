"""Stateful REST fuzzing as two users: no 5xx, and nothing of one user in the other's answers.

Builds on the single-user run (tests/chatapp/test_api_fuzz.py: every operation, every check):
here schemathesis chains operations through the links it infers from the schema (a session
created, then read, renamed, appended to, rewound, deleted; a memory listed, then corrected,
deleted ...), signed in as one user while the other user's session and memory ids are offered
as path parameters half of the time. Every answer must be free of 5xx, and must hold none of
the other user's ids, user name or words. Run both ways (A probing B, B probing A), bounded
and derandomised: ``FUZZ_STATEFUL_EXAMPLES`` scenarios of at most ``FUZZ_STATEFUL_STEPS`` calls
each (30 and 8 by default: about 300 calls each way, about two minutes for both on SQLite
and on PostgreSQL), every scenario starting from the same two users and data. With the
session API's owner check removed, this budget finds the leak (tried).
"""

from __future__ import annotations

import base64
import os

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from sessions_app import services
from sessions_app.events import Event, EventActions
from tests.chatapp.test_api_fuzz import CONFIG
from tests.factories import MemoryFactory, UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

EXAMPLES = int(os.environ.get("FUZZ_STATEFUL_EXAMPLES", "30"))
STEPS = int(os.environ.get("FUZZ_STATEFUL_STEPS", "8"))
PASSWORD = "fuzz-password-not-secret"
USERS = {
    "a": {
        "username": "fuzz-ada",
        "session_id": "ada-session-7f3c",
        "memory_id": "0d4f5a52-7e11-4c6b-9a0e-3f1b2c4d5e61",
        "word": "Marmalwick",
    },
    "b": {
        "username": "fuzz-bea",
        "session_id": "bea-session-2e9d",
        "memory_id": "9c1e2b3a-4d5f-4a6b-8c7d-1e2f3a4b5c6d",
        "word": "Quillobrant",
    },
}

schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application(), config=CONFIG)
_acting = {"who": "a"}
_calls: list[str] = []
_problems: list[str] = []


def _other_of(who: str) -> str:
    return "b" if who == "a" else "a"


def _other() -> str:
    return _other_of(_acting["who"])


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    """A third of the ids are the acting user's own objects, a third the other user's, the
    rest made up (the path's other parameters, such as ``app_name``, stay generated)."""
    names = [
        name for name in ("session_id", "memory_id") if f"{{{name}}}" in context.operation.path
    ]
    if not names:
        return st.just(path_parameters)
    generated = path_parameters or {}
    own = {name: USERS[_acting["who"]][name] for name in names}
    theirs = {name: USERS[_other()][name] for name in names}
    return st.sampled_from([generated, {**generated, **own}, {**generated, **theirs}])


def _plant(key: str) -> None:
    """A user with a session (events, state of every scope) and a memory, each holding their
    word; whatever an earlier scenario left of the user is deleted first."""
    data = USERS[key]
    get_user_model().objects.filter(username=data["username"]).delete()
    user = UserFactory(username=data["username"], password=PASSWORD)
    session = services.session_create(
        app_name="chat",
        user_id=str(user.pk),
        session_id=data["session_id"],
        state={"note": data["word"], "user:nick": data["word"]},
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
    MemoryFactory(id=data["memory_id"], user=user, text=f"The user's word is {data['word']}.")


def _secrets_of(key: str) -> list[str]:
    data = USERS[key]
    return [data["username"], data["session_id"], data["memory_id"], data["word"]]


class TwoUsers(schema.as_state_machine()):
    """Every call signed in as the acting user; every answer checked for the other's data."""

    def setup(self) -> None:
        """Every scenario starts from the same two users and data. Hypothesis may run a
        scenario's choices again (to replay or shrink it) and requires the same draws each
        time; which links are open depends on the answers, so the answers must not depend
        on what earlier scenarios wrote (on PostgreSQL a run stopped with
        FlakyStrategyDefinition when they did)."""
        _plant("a")
        _plant("b")

    def get_call_kwargs(self, case) -> dict:
        token = base64.b64encode(f"{USERS[_acting['who']]['username']}:{PASSWORD}".encode())
        return {"headers": {"Authorization": f"Basic {token.decode()}"}}

    def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:
        """Problems are collected, not raised: a raise would make Hypothesis replay the
        scenario against a database the first run already changed."""
        call = f"{_acting['who']}: {case.method} {case.formatted_path}"
        _calls.append(call)
        if response.status_code >= 500:
            _problems.append(f"{call} answered {response.status_code}")
        # In the bytes: an attached file's download is binary, and not text in any encoding.
        leaked = [secret for secret in _secrets_of(_other()) if secret.encode() in response.content]
        if leaked:
            _problems.append(f"{call} ({response.status_code}) shows the other user's {leaked}")


@pytest.fixture
def two_users(settings):
    """Fast password checks, and no lockout for the wrong credentials the run may send."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.AXES_FAILURE_LIMIT = 1_000_000


@pytest.mark.parametrize("acting", ["a", "b"])
def test_stateful_calls_of_one_user_never_show_the_other_users_data(acting, two_users):
    _acting["who"] = acting
    _calls.clear()
    _problems.clear()
    try:
        TwoUsers.run(
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
        )
    finally:
        _acting["who"] = "a"
    assert _problems == []
    other = _other_of(acting)
    # The run did reach the other user's objects by id, not only the acting user's own.
    assert any(USERS[other]["session_id"] in call for call in _calls)
