"""Stateful REST fuzzing as two users: no 5xx, and nothing of one user in the other's answers.

Builds on the single-user run (tests/chatapp/test_api_fuzz.py: every operation, every check):
here schemathesis chains operations through the links it infers from the schema (a session
created, then read, renamed, appended to, rewound, deleted; a memory listed, then corrected,
deleted ...), signed in as one user while the other user's session and memory ids are offered
as path parameters a quarter of the time. Every answer must be free of 5xx, and must hold none
of the other user's ids, user name or words. Run both ways (A probing B, B probing A), bounded
and derandomised: ``FUZZ_STATEFUL_EXAMPLES`` scenarios of at most ``FUZZ_STATEFUL_STEPS`` calls
each (6 and 8 by default; Hypothesis runs many more scenarios than it counts, about 300 calls
in all), every scenario starting from the same two users and data. With the session API's owner
check removed (``session_record_get`` filtering on the id alone), this budget finds the leak
(tried).

Ids and bodies are also drawn hostile (tests/hostile_text.py): a path parameter may be a NUL
character, a lone surrogate's bytes, odd text (right-to-left and zero-width characters, JSON,
a path, an id of thousands of characters) or the other user's id disguised; any string of a
body, keys too, may get a NUL character, a lone surrogate or odd text put in (text a
hundred thousand characters long among it), or be replaced by odd text or an id of the other
user. Every such request must be refused or served, never answered 5xx.
"""

from __future__ import annotations

import base64
import os

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig

from sessions_app import services
from sessions_app.events import Event, EventActions
from tests.factories import MemoryFactory, UserFactory
from tests.hostile_text import (
    HOSTILE_PATH_IDS,
    HOSTILE_STRINGS,
    ODD_PATH_IDS,
    ODD_STRINGS,
    poisoned,
)
from tests.served_schema import served_schema

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("requests_in_the_test_transaction"),
    pytest.mark.timeout(900),
]

EXAMPLES = int(os.environ.get("FUZZ_STATEFUL_EXAMPLES", "6"))
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

# Failures show the values sent (test data); NUL characters drawn too.
CONFIG = SchemathesisConfig.from_dict(
    {"output": {"sanitization": {"enabled": False}}, "generation": {"allow-x00": True}}
)
schema = served_schema(CONFIG)
_acting = {"who": "a"}
_calls: list[str] = []
_problems: list[str] = []
# The other user's ids the acting user wrote in a body this scenario (a memory's text, a
# state value): its own data holds them from then on, and shows them.
_written: set[str] = set()


def _other_of(who: str) -> str:
    return "b" if who == "a" else "a"


def _other() -> str:
    return _other_of(_acting["who"])


def _ids_of(key: str) -> tuple[str, str]:
    return USERS[key]["session_id"], USERS[key]["memory_id"]


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    """The ids are the acting user's own objects, the other user's, made up, or hostile: a
    NUL character or a lone surrogate's bytes, odd text (``ODD_PATH_IDS``), the other user's
    id with a zero-width character or in capitals (the path's other parameters, such as
    ``app_name``, stay generated unless made hostile)."""
    generated = path_parameters or {}
    names = [
        name for name in ("session_id", "memory_id") if f"{{{name}}}" in context.operation.path
    ]
    theirs_odd = [
        variant for mine in _ids_of(_other()) for variant in (mine + "\u200b", mine.upper())
    ]
    hostile = st.builds(
        lambda name, bad: {**generated, name: bad},
        st.sampled_from(sorted(generated)) if generated else st.nothing(),
        st.sampled_from([*HOSTILE_PATH_IDS, *ODD_PATH_IDS, *theirs_odd]),
    )
    if not names:
        return st.one_of(st.just(generated), hostile)
    own = {name: USERS[_acting["who"]][name] for name in names}
    theirs = {name: USERS[_other()][name] for name in names}
    return st.one_of(
        st.just({**generated, **theirs}), st.just({**generated, **own}), st.just(generated), hostile
    )


@schema.hook
def before_generate_body(context, strategy):
    """Half the JSON bodies with hostile text in their strings, keys too: a NUL character, a
    lone surrogate or odd text put in, or a string replaced by odd text or one of the other
    user's ids (an upload's form cannot carry a lone surrogate at all)."""
    if context.operation.path.endswith("/artifacts/"):
        return strategy
    return st.one_of(
        strategy,
        strategy.flatmap(
            lambda value: poisoned(
                value,
                bad=HOSTILE_STRINGS + ODD_STRINGS,
                substitutes=ODD_STRINGS + _ids_of(_other()),
            )
        ),
    )


def _plant(key: str) -> None:
    """A user with a session (events, state of every scope) and a memory, each holding their
    word."""
    data = USERS[key]
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
        """Every scenario starts from the same two users and data (``two_users``): it runs in a
        transaction rolled back at its end. Hypothesis may run a scenario's choices again (to
        replay or shrink it) and requires the same draws each time; which links are open
        depends on the answers, so the answers must not depend on what earlier scenarios wrote
        (on PostgreSQL a run stopped with FlakyStrategyDefinition when they did). A rollback
        costs nothing, where planting the users again cost most of the run."""
        self.scenario = transaction.atomic()
        self.scenario.__enter__()
        _written.clear()

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self.scenario.__exit__(None, None, None)

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
        body = repr(case.body)
        _written.update(secret for secret in _ids_of(_other()) if secret in body)
        # In the bytes: an attached file's download is binary, and not text in any encoding.
        leaked = [
            secret
            for secret in _secrets_of(_other())
            if secret.encode() in response.content and secret not in _written
        ]
        if leaked:
            _problems.append(f"{call} ({response.status_code}) shows the other user's {leaked}")


@pytest.fixture
def two_users(settings):
    """The two users and their data, planted once; fast password checks, and no lockout for the
    wrong credentials the run may send. Requests keep the test's connection, as Django's test
    client has them do: closing it would end a scenario's transaction."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.AXES_FAILURE_LIMIT = 1_000_000
    _plant("a")
    _plant("b")
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


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
