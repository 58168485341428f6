import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers
from django.conf import settings as django_settings
from django.core.signals import request_finished, request_started
from django.db import OperationalError, close_old_connections, connection, connections
from django.db.backends.base.creation import TEST_DATABASE_PREFIX
from rest_framework.test import APIClient

from core.background import background_wait_idle
from tests.collected_static import static_collected
from tests.factories import UserFactory
from tests.migrated_templates import postgresql_admin, postgresql_migrated, sqlite_migrated

# Set before any test module imports chatapp.asgi, which starts the embedded mode's periodic
# thread: that thread would run the real cleanup tasks against whichever test database is open,
# outside the tests' transactions (SQLite then reports "database table is locked").
django_settings.PERIODIC_IN_PROCESS = False

# Django's test client loads the middleware chain afresh for every client, and whitenoise's
# middleware then indexes every collected static file (a thirtieth of a second, about a third
# of the time of a test that makes a client per visitor). Here it looks a file up when one is
# asked for, as under DEBUG; static files as production serves them are tested by the browser
# tests' servers and tests/chatapp/test_settings_production.py.
django_settings.WHITENOISE_AUTOREFRESH = True

# The suite's own threads (its concurrency tests, asgiref's executors) take connections and end
# without giving them back, which a connection pool would count as in use for good: after a
# few such tests every later one waited for a connection. So the suite connects as with
# DATABASE_POOL_MAX_SIZE=0; the pool is tested in tests/core/test_postgresql.py and, as it is
# deployed, by the multi-process suite (tests/multiprocess), whose servers have it.
if django_settings.DATABASES["default"].get("OPTIONS", {}).pop("pool", None):
    django_settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

# After each transactional test the suite's own connections empty the database with DELETE
# rather than TRUNCATE, a quarter of a second less a test (tests/postgresql/base.py says why);
# the servers the tests start run the app's backend as it is.
if django_settings.DATABASES["default"]["ENGINE"] == "core.postgresql":
    django_settings.DATABASES["default"]["ENGINE"] = "tests.postgresql"
    # Django made this thread's connection as it loaded the models (for the name length of
    # their tables): it is made again, of the tests' backend.
    connections["default"].close()
    del connections["default"]

# The SQLite test database is a file under build/ (chatapp.settings); `make test` creates the
# folder, a bare `pytest` on a fresh checkout would otherwise fail to open the database.
if django_settings.USING_SQLITE:
    Path(django_settings.DATABASES["default"]["TEST"]["NAME"]).parent.mkdir(exist_ok=True)


@pytest.fixture(scope="session")
def django_db_keepdb(request, django_db_modify_db_settings) -> bool:
    """Each worker's test database starts as a copy of the migrated template the test servers
    copy too (tests/migrated_templates.py), kept as it is: Django then only finds every
    migration applied, instead of running them all again in every worker."""
    if reuse := request.config.getvalue("reuse_db"):
        return reuse
    database = django_settings.DATABASES["default"]
    name = database["TEST"].get("NAME") or f"{TEST_DATABASE_PREFIX}{database['NAME']}"
    if django_settings.USING_SQLITE:
        sqlite_migrated(Path(name), env=os.environ)
        return True
    url = urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{name}").geturl()
    with postgresql_admin(url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    postgresql_migrated(url, env=os.environ)
    return True


@pytest.fixture(scope="session", autouse=True)
def static_files_collected():
    """Static files are served from STATIC_ROOT, as in production (DEBUG is off by default and
    whitenoise then does not look in the apps' folders): they are collected, as `make run` does,
    so that a fresh checkout's tests see the same files a served site does; once for the code
    as it is, into the folder tests/worker_isolation.py names (tests/collected_static.py)."""
    static_collected(os.environ)


@pytest.fixture(scope="session", autouse=True)
def end_stray_connections(django_db_setup, django_db_blocker):
    """Before the test database is dropped, end connections that worker threads left open.

    Async tests reach the database from asgiref's and the background pool's
    threads, whose connections outlive the test; PostgreSQL refuses to drop a
    database that still has sessions.
    """
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock():
        try:
            cursor = connection.cursor()
        except OperationalError:
            return  # no test used the database, so it was never created
        with cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2's deliberate slowness would cost a second per test user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def artifacts_dir(settings, tmp_path):
    """Each test keeps artifact files in a folder of its own, never in the checkout's build/."""
    folder = tmp_path / "artifacts"
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": folder},
        },
    }
    return folder


@pytest.fixture(autouse=True)
def api_throttling_off(settings):
    """The REST API's rate limits are off except in their own tests
    (tests/chatapp/test_throttling.py): counted per user id in a shared cache, they
    would otherwise couple unrelated tests that reuse the same ids."""
    settings.API_THROTTLE_USER_RATE = ""
    settings.API_THROTTLE_ANON_RATE = ""
    # Likewise the sign-up limit per address (tests/access_app/test_signin.py): every test
    # client signs up from 127.0.0.1.
    settings.SIGNUP_PER_ADDRESS_PER_HOUR = 0


@pytest.fixture(autouse=True)
def rows_written_at_once(settings):
    """The service API's audit rows are written as each request ends, not held back
    (core.write_behind): a test reads them straight after, and a test's event loop ends
    with it. tests/core/test_write_behind.py turns it back on."""
    settings.WRITE_BEHIND_SECONDS = 0


@pytest.fixture(autouse=True)
def app_settings_read_afresh():
    """Each test reads apps' settings afresh: the app policy keeps what it read for a few
    seconds for the memory triggers run from the event loop (agents_app.app_policy)."""
    from sessions_app.app_policy import app_policy_get

    yield
    forget = getattr(app_policy_get(), "recent_forget", None)
    if forget is not None:
        forget()


@pytest.fixture(autouse=True)
def async_database_only_in_transactional_tests(request, monkeypatch):
    """A test run in a transaction (``django_db`` without ``transaction=True``) writes on
    Django's connection and never commits: the event loop's own connections
    (``core.async_database``) cannot see its rows, so async code there takes Django's
    connection, as it does on SQLite. Transactional tests reach the database as production
    does."""
    names = request.fixturenames
    if "transactional_db" in names or "live_server" in names:
        return
    marker = request.node.get_closest_marker("django_db")
    if marker is not None:
        if marker.kwargs.get("transaction", marker.args[0] if marker.args else False):
            return
    elif "db" not in names:
        return
    from core import async_database

    monkeypatch.setattr(async_database, "available", lambda: False)


@pytest.fixture(autouse=True)
def channel_layer_of_this_test():
    """Each test its own channel layer, as each process has its own in production: the
    layer keeps receive locks and cleanup tasks tied to the event loop that made them, and a
    test's loop ends with the test, where a process's lives as long as the layer. A receive
    cut off by one test's end would otherwise leave a lock bound to a closed loop for the
    next test of the worker ("bound to a different event loop")."""
    channel_layers.set(DEFAULT_CHANNEL_LAYER, channel_layers.make_backend(DEFAULT_CHANNEL_LAYER))


@pytest.fixture(autouse=True)
def service_keys_verified_afresh():
    """Each test verifies API keys afresh: a process keeps the keys it verified for a few
    seconds (agents_app.key_cache), and tests change keys behind the services' back."""
    from agents_app.key_cache import forget_all

    yield
    forget_all()


@pytest.fixture
def requests_in_the_test_transaction():
    """Requests sent to the WSGI application itself (schemathesis' ``from_wsgi``) keep the
    test's database connection, as Django's test client has its requests do: the end of each
    request would otherwise close it, and the transaction the test is rolled back with. Such
    tests then needed ``transaction=True``, and a flush of every table after each (0.4 s a
    test on PostgreSQL), and a new connection a request."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def background_finished():
    """After the test, the background work it started (memory jobs run in-process) is done:
    requested after the database, it finishes before a transactional test's flush, which
    would otherwise deadlock with a job still writing."""
    yield
    background_wait_idle()


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


@pytest.fixture
def api_client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def requires_postgres(db):
    """Skip on SQLite: row locks, true concurrency and reads straight from async code need
    PostgreSQL (CI's second pass)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL; runs in CI's PostgreSQL pass")


@pytest.fixture
def fake_gemini(settings, monkeypatch):
    """A local server speaking Gemini's REST API, with the google-genai client pointed at it.

    Proxy variables are cleared so that the client connects to 127.0.0.1
    directly: with a proxy configured, even a local request would leave the
    machine.
    """
    from tests.fake_gemini import FakeGemini

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    server = FakeGemini().start()
    settings.GEMINI_API_KEY = "test-key"
    settings.GEMINI_BASE_URL = server.url
    settings.GOOGLE_GENAI_USE_VERTEXAI = False
    yield server
    server.stop()


@pytest.fixture
async def gemini(fake_gemini):
    """The Gemini model (``gemini-2.5-flash``) through the real client, on the fake server."""
    from core.gemini import GeminiModel

    model = GeminiModel("gemini-2.5-flash")
    yield model
    await model.aclose()


@pytest.fixture
def fake_openai(settings, monkeypatch):
    """A local server speaking the OpenAI-compatible API, with ``LLM_PROVIDER=openai`` and the
    openai client pointed at it (proxy variables cleared, as for ``fake_gemini``)."""
    from tests.fake_openai import FakeOpenAI

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    server = FakeOpenAI().start()
    settings.LLM_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = server.url
    settings.OPENAI_API_KEY = ""
    yield server
    server.stop()


@pytest.fixture
async def openai_model(fake_openai):
    """The model ``llama3.2`` of the fake OpenAI-compatible server, through the real client."""
    from core.openai_compatible import OpenAICompatibleModel

    model = OpenAICompatibleModel("llama3.2")
    yield model
    await model.aclose()


@pytest.fixture
def unreachable_cache(settings):
    """Django's cache on a Redis that does not answer (a port nothing listens on), as in an
    outage: every cache call raises redis' ConnectionError."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
        }
    }


@pytest.fixture
def unreachable_broker(settings):
    """Celery sends tasks to a broker that does not answer (a port nothing listens on), as in a
    Redis outage: every ``apply_async`` raises kombu's OperationalError."""
    import socket

    from chatapp.celery import app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.BACKGROUND_TASKS = "celery"
    saved = app.conf.broker_url

    def pools_drop() -> None:
        # As Celery does after a fork: the next send connects afresh, to the broker now set.
        app._pool = None
        app.amqp._producer_pool = None

    app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    pools_drop()
    yield
    app.conf.broker_url = saved
    pools_drop()


@pytest.fixture
def local_embeddings(settings):
    """The local MiniLM embedder as the process's embedder.

    Skipped where the ``local-embeddings`` extra is not installed (``make test`` keeps torch
    out of its environment); ``make test-local-embeddings``, which CI runs, installs it and sets
    LOCAL_EMBEDDINGS_REQUIRED so that a broken install fails instead of skipping.
    """
    from memory_app.embedding import embedder_get, local_model_installed

    if not local_model_installed():
        if os.environ.get("LOCAL_EMBEDDINGS_REQUIRED"):
            pytest.fail("LOCAL_EMBEDDINGS_REQUIRED is set, the local-embeddings extra is missing")
        pytest.skip("needs the local-embeddings extra; CI runs it with make test-local-embeddings")
    settings.MEMORY_EMBEDDER = "local"
    embedder_get.cache_clear()
    yield
    embedder_get.cache_clear()
