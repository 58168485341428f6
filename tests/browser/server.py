"""A real daphne process serving the app to a real browser, on a database of its own.

Also how the browser signs in, shared by the tests and the screenshot script.

pytest-django's ``live_server`` speaks WSGI only, and the chat needs WebSockets,
so the browser tests run the ASGI app the way production does: daphne in a
subprocess. Its database is a fresh SQLite file, or, when ``DATABASE_URL``
points at PostgreSQL, a fresh database on that server, dropped afterwards.
With ``REDIS_URL`` set the server uses Redis too, under a cache prefix of its own.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import environ
from playwright.sync_api import Page, expect

from tests.collected_static import static_collected
from tests.migrated_templates import postgresql_admin, postgresql_migrated, sqlite_migrated

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Debian's Chromium built as the headless shell (package chromium-headless-shell), what
# Playwright itself runs for headless tests: the same engine as /usr/bin/chromium without the
# full browser around it, at half its processor time a test.
CHROMIUM = Path("/usr/bin/chromium-headless-shell")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "browser-test-password"
USER_POOL_SIZE = 200
# The server refuses longer messages unread (128 MiB in production): low enough for a test to
# type one into the chat, above the message of a megabyte that the chat itself refuses.
WEBSOCKET_MAX_MESSAGE_BYTES = 2_000_000
# How long a server may take to answer after it is started before the tests give up (not an
# assertion): seconds on a quiet machine, but a Django start is seconds of processor time, and
# on two cores shared with the rest of the suite and its browsers one took more than a minute.
STARTUP_TIMEOUT_SECONDS = 180

SET_UP = """
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
password = make_password({password!r})
get_user_model().objects.bulk_create(
    get_user_model()(username=f"reader-{{n:02d}}", password=password) for n in range({count})
)
"""


# Runs in `manage.py shell -c`: reads scripts (their length in bytes, a newline, the script in
# UTF-8) from stdin and runs each in a copy of the shell's namespace; answers on the stdout it
# was started with: "ok" or "error", the length in bytes of what the script printed, a
# newline, and that output (or the traceback) in UTF-8. Bytes, so that no newline translation
# on either side can make a length wrong.
CONSOLE_LOOP = """
import contextlib, io, os, sys, traceback
from django.db import connections
replies = open(os.dup(1), "wb")
os.dup2(2, 1)  # anything else printed (a log handler on stdout) goes to the console's log
namespace = dict(globals())
while size := sys.stdin.buffer.readline():
    script = sys.stdin.buffer.read(int(size)).decode()
    printed = io.StringIO()
    status = b"ok"
    try:
        with contextlib.redirect_stdout(printed):
            exec(script, dict(namespace))
    except BaseException:
        status = b"error"
        printed.write(traceback.format_exc())
    finally:
        connections.close_all()
    output = printed.getvalue().encode(errors="backslashreplace")
    replies.write(status + b" %d\\n" % len(output) + output)
    replies.flush()
"""
CONSOLE_TIMEOUT_SECONDS = 120


class Console:
    """One ``manage.py shell`` process a server, kept running: each script then costs
    milliseconds instead of a Django start (about a second of processor time), which matters
    to the tests that poll the server's database while background jobs run. A context
    manager: the process ends with the block."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self._log = log_path.open("ab")
        self._process = subprocess.Popen(
            [str(BIN / "python"), str(ROOT / "manage.py"), "shell", "-v", "0", "-c", CONSOLE_LOOP],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            bufsize=0,
        )
        self._received = bytearray()

    def __enter__(self) -> Console:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def run(self, script: str) -> str:
        """``script``'s output; a script that raises fails the caller with its traceback, and
        one that runs past ``CONSOLE_TIMEOUT_SECONDS`` ends the console."""
        body = script.encode()
        self._process.stdin.write(b"%d\n" % len(body) + body)
        deadline = time.monotonic() + CONSOLE_TIMEOUT_SECONDS
        while b"\n" not in self._received:
            self._receive(deadline)
        header, _, self._received = self._received.partition(b"\n")
        status, size = header.split()
        while len(self._received) < int(size):
            self._receive(deadline)
        output = bytes(self._received[: int(size)]).decode()
        del self._received[: int(size)]
        if status != b"ok":
            raise RuntimeError(f"the script failed:\n{script}\n{output}")
        return output

    def _receive(self, deadline: float) -> None:
        ready, _, _ = select.select([self._process.stdout], [], [], deadline - time.monotonic())
        if not ready:
            self._process.kill()
            raise TimeoutError(f"the console gave no answer in {CONSOLE_TIMEOUT_SECONDS} s")
        chunk = self._process.stdout.read(65536)
        if not chunk:
            raise RuntimeError(f"the console exited with {self._process.wait()}")
        self._received += chunk

    def close(self) -> None:
        self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process.stdout.close()
        self._log.close()


@dataclass
class Server:
    base_url: str
    log_path: Path
    usernames: list[str]
    console: Console = field(repr=False)
    password: str = PASSWORD
    env: dict[str, str] = field(default_factory=dict)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def shell(self, script: str) -> str:
        """Run ``script`` as ``manage.py shell -c`` would, on the server's database; returns
        what it printed."""
        return self.console.run(script)


SESSION_OF = """
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
client = Client()
client.force_login(get_user_model().objects.get(username={username!r}))
print(settings.SESSION_COOKIE_NAME, client.cookies[settings.SESSION_COOKIE_NAME].value)
"""


def sign_in(page: Page, server: Server, username: str) -> None:
    """Sign in as ``username`` and open the chat, ready to type. The session is made by Django's
    ``force_login``, without a round trip through the sign-in form: the form itself is what
    tests/browser/test_sign_in.py and the account pages' tests drive."""
    name, value = server.shell(SESSION_OF.format(username=username)).split()
    page.context.add_cookies([{"name": name, "value": value, "url": server.base_url}])
    page.goto(f"{server.base_url}/")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _database(name: str) -> Iterator[str]:
    """The DATABASE_URL of a database for the server (not made yet), removed afterwards."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        with tempfile.TemporaryDirectory(prefix="chat-browser-") as folder:
            yield f"sqlite:///{folder}/{name}.sqlite3"
        return
    database = f"{environ.Env.db_url_config(url)['NAME']}_{name}"
    try:
        yield urlsplit(url)._replace(path=f"/{database}").geturl()
    finally:
        with postgresql_admin(url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _wait_until_serving(process: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise RuntimeError(f"daphne did not answer {url} in time:\n{log_path.read_text()}")


@contextlib.contextmanager
def running_server(
    log_dir: Path, *, chunk_delay: float = 0.05, extra_env: dict[str, str] | None = None
) -> Iterator[Server]:
    """Make a fresh database (a copy of tests/migrated_templates.py's migrated template),
    create a pool of users and serve the app with daphne, set up as ``make run`` sets it up
    (DEBUG off, static files collected and served by whitenoise; collected once for the code
    as it is, tests/collected_static.py), but for ``WEBSOCKET_MAX_MESSAGE_BYTES`` and a fast
    password hasher (tests/browser/server_settings.py).

    ``chunk_delay`` is the offline model's pause between streamed chunks.
    """
    name = f"browser_{uuid.uuid4().hex[:10]}"
    with (
        _database(name) as database_url,
        tempfile.TemporaryDirectory(prefix="chat-artifacts-") as artifacts_dir,
    ):
        env = {
            **{key: value for key, value in os.environ.items() if key != "DEBUG"},
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "tests.browser.server_settings",
            "DATABASE_URL": database_url,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "OFFLINE_MODEL_CHUNK_DELAY_SECONDS": str(chunk_delay),
            "GEMINI_API_KEY": "",
            "GOOGLE_API_KEY": "",
            "GOOGLE_GENAI_USE_VERTEXAI": "false",
            "LLM_PROVIDER": "gemini",
            "OPENAI_BASE_URL": "",
            "OPENAI_API_KEY": "",
            "BACKGROUND_TASKS": "inprocess",
            "CACHE_KEY_PREFIX": name,
            "PRODUCTION": "false",
            "ARTIFACTS_DIR": artifacts_dir,
            **(extra_env or {}),
        }
        env["STATIC_ROOT"] = str(static_collected(env))
        port = _free_port()
        log_path = log_dir / f"daphne-{port}.log"
        if database_url.startswith("sqlite:///"):
            sqlite_migrated(Path(database_url.removeprefix("sqlite:///")), env=env)
        else:
            postgresql_migrated(database_url, env=env)
        with Console(env, log_dir / f"console-{port}.log") as console:
            console.run(SET_UP.format(password=PASSWORD, count=USER_POOL_SIZE))
            command = [
                *[sys.executable, "-m", "chatapp.webserver", "-b", "127.0.0.1", "-p", str(port)],
                *["--websocket-max-message-size", str(WEBSOCKET_MAX_MESSAGE_BYTES)],
            ]
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [*command, "chatapp.asgi:application"],
                    env=env,
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            base_url = f"http://127.0.0.1:{port}"
            try:
                _wait_until_serving(process, f"{base_url}/accounts/login/", log_path)
                yield Server(
                    base_url=base_url,
                    log_path=log_path,
                    usernames=[f"reader-{n:02d}" for n in range(USER_POOL_SIZE)],
                    console=console,
                    env=env,
                )
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@contextlib.contextmanager
def screenshot_page(*, width: int, height: int) -> Iterator[tuple[Page, Server]]:
    """A Chromium page of the given size beside a throwaway server, for the docs' screenshots."""
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory() as logs,
        running_server(Path(logs)) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height}), server
        finally:
            browser.close()
