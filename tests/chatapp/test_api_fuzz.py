"""REST fuzzing: every operation of the OpenAPI schema, driven by schemathesis.

The schema is the one the app serves at ``/api/schema/``; the requests go
in-process to the Django WSGI application (the same middleware stack as a
browser's requests), as a signed-in user who has a session with events and
state in place, so that generated requests reach real objects as well as
unknown ones. Whatever schemathesis sends, the app must answer without a 5xx
and as its schema says (status codes, content types, bodies), accept what the
schema allows, refuse what it does not, and enforce authentication. Uploads are
real files (an image, a PDF, a text): a schema says a part is binary, not which
formats its bytes must be in, and the API reads them to check.

Examples are bounded and derandomised so the run takes a minute or two and
gives the same verdict every time; raise ``FUZZ_EXAMPLES`` for a longer hunt.

A second run draws hostile text (tests/hostile_text.py) on every operation, the service API's
too: NUL characters in every string schemathesis makes, path ids that are a NUL character or a
lone surrogate's bytes, JSON bodies with either put in any string. Such requests are refused
(400, 404, or 401 for the service API without its key); the run checks that none answers
5xx, ``FUZZ_HOSTILE_EXAMPLES`` examples per operation (5 by default).
"""

from __future__ import annotations

import base64
import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig

from sessions_app import services
from sessions_app.events import Event, EventActions
from tests.factories import MemoryFactory, UserFactory
from tests.hostile_text import HOSTILE_PATH_IDS, poisoned
from tests.sample_files import image_bytes, pdf_bytes
from tests.served_schema import served_schema

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("requests_in_the_test_transaction"),
    pytest.mark.timeout(600),
]

USERNAME = "fuzz-user"
PASSWORD = "fuzz-password-not-secret"
SESSION_ID = "fuzz-session"
MEMORY_ID = "5b3cf1a4-0c1e-4a57-9d1b-6f1f3f0c2a11"
REAL_IDS = {"session_id": SESSION_ID, "memory_id": MEMORY_ID}
INVOCATION_IDS = ("inv-1", "inv-2")
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))
HOSTILE_EXAMPLES = int(os.environ.get("FUZZ_HOSTILE_EXAMPLES", "5"))

# Explicit (not discovered from a schemathesis.toml), and failures show the values sent:
# everything here is test data. No NUL character is drawn, as for the service accounts' fuzz
# (tests/agents_app/test_service_api_fuzz.py says why); tests/chatapp/test_api_refusals.py
# sends NUL characters and checks the refusal.
CONFIG = SchemathesisConfig.from_dict(
    {"output": {"sanitization": {"enabled": False}}, "generation": {"allow-x00": False}}
)
# The service-account API (/api/v1/) answers a browser user's credentials 401 whatever is sent:
# tests/agents_app/test_service_api_fuzz.py fuzzes it with a key.
schema = served_schema(CONFIG).exclude(path_regex=r"^/api/v1/")


@schema.hook
def before_generate_path_parameters(context, strategy):
    """Half the generated ids are the user's real objects, so handlers get past the 404: on
    the paths whose every parameter is one of them (the service paths, which also name an
    app and an end user, answer this user 401 whatever the ids)."""
    path = context.operation.path
    real = {name: value for name, value in REAL_IDS.items() if f"{{{name}}}" in path}
    if not real or path.count("{") != len(real):
        return strategy
    return st.one_of(strategy, st.just(real))


UPLOADS = (image_bytes(), image_bytes("JPEG"), pdf_bytes(), b"Notes\n")


@schema.hook
def before_generate_body(context, strategy):
    """Rewinds also name invocations that exist in the session; uploads are files of the
    accepted formats."""
    path = context.operation.path if context.operation else ""
    if path.endswith("/rewind/"):
        return st.one_of(
            strategy, st.sampled_from([{"invocation_id": value} for value in INVOCATION_IDS])
        )
    if path.endswith("/artifacts/") and context.operation.method.upper() == "POST":
        return st.lists(st.sampled_from(UPLOADS), min_size=1, max_size=3).map(
            lambda files: {"file": files}
        )
    return strategy


@pytest.fixture
def data_in_place(settings):
    """The fuzzing user with a session, events (two invocations), state of every scope and
    a memory."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # schemathesis' authentication checks send this account wrong credentials again and again;
    # the sign-in guard would lock it (its lockouts are tested in tests/access_app/test_signin).
    settings.AXES_FAILURE_LIMIT = 1_000_000
    user = UserFactory(username=USERNAME, password=PASSWORD)
    session = services.session_create(
        app_name="chat",
        user_id=str(user.pk),
        session_id=SESSION_ID,
        state={"topic": "fuzz", "user:name": "Ada", "app:greeting": "hi"},
    )
    for invocation_id in INVOCATION_IDS:
        services.event_append(
            session=session,
            event=Event(
                invocation_id=invocation_id,
                author="user",
                actions=EventActions(state_delta={"step": invocation_id}),
            ),
        )
    MemoryFactory(id=MEMORY_ID, user=user, text="Prefers green tea.")
    return user


@schema.auth()
class SignedInUser:
    """HTTP Basic credentials of the fuzzing user, on every generated request."""

    def get(self, case, context) -> str:
        return base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()

    def set(self, case, data: str, context) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Basic {data}"}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_without_a_server_error_and_as_documented(case, data_in_place):
    case.call_and_validate()


hostile_schema = served_schema(
    SchemathesisConfig.from_dict(
        {
            "output": {"sanitization": {"enabled": False}},
            "generation": {"allow-x00": True},
            # The schema's boundary values (schemathesis' coverage phase) are the test above's;
            # here only drawn cases, which the hooks below make hostile.
            "phases": {"coverage": {"enabled": False}},
        }
    ),
)
hostile_schema.auth()(SignedInUser)


@hostile_schema.hook("flatmap_path_parameters")
def hostile_path_parameters(context, path_parameters):
    """Half the time one of the path's ids is a NUL character or a lone surrogate's bytes."""
    generated = path_parameters or {}
    if not generated:
        return st.just(generated)
    hostile = st.builds(
        lambda name, bad: {**generated, name: bad},
        st.sampled_from(sorted(generated)),
        st.sampled_from(HOSTILE_PATH_IDS),
    )
    return st.one_of(st.just(generated), hostile)


@hostile_schema.hook("before_generate_body")
def hostile_body(context, strategy):
    """Half the JSON bodies with NUL characters or lone surrogates put in their strings (an
    upload's form cannot carry a lone surrogate at all)."""
    if context.operation.path.endswith("/artifacts/"):
        return strategy
    return st.one_of(strategy, strategy.flatmap(poisoned))


@hostile_schema.parametrize()
@settings(
    max_examples=HOSTILE_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_nul_character_or_lone_surrogate_gives_a_server_error(case, data_in_place):
    response = case.call()

    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
