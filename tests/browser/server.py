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

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
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
# type one into the chat.
WEBSOCKET_MAX_MESSAGE_BYTES = 4_000_000
STARTUP_TIMEOUT_SECONDS = 60

CREATE_USERS = """
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
password = make_password({password!r})
get_user_model().objects.bulk_create(
    get_user_model()(username=f"reader-{{n:02d}}", password=password) for n in range({count})
)
"""


@dataclass
class Server:
    base_url: str
    log_path: Path
    usernames: list[str]
    password: str = PASSWORD
    env: dict[str, str] = field(default_factory=dict)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def shell(self, script: str) -> str:
        """Run ``script`` in ``manage.py shell`` on the server's database; returns its output."""
        manage = [str(BIN / "python"), str(ROOT / "manage.py"), "shell", "-c", script]
        done = subprocess.run(manage, env=self.env, check=True, capture_output=True, text=True)
        return done.stdout


def sign_in(page: Page, server: Server, username: str) -> None:
    """Sign in through the login form; the chat page is where it lands, ready to type."""
    page.goto(f"{server.base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _database(name: str) -> Iterator[str]:
    """The DATABASE_URL of a fresh database for the server, removed afterwards."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        with tempfile.TemporaryDirectory(prefix="chat-browser-") as folder:
            yield f"sqlite:///{folder}/{name}.sqlite3"
        return
    import psycopg

    params = environ.Env.db_url_config(url)
    database = f"{params['NAME']}_{name}"
    admin = psycopg.connect(
        dbname="postgres",
        user=params.get("USER") or None,
        password=params.get("PASSWORD") or None,
        host=params.get("HOST") or None,
        port=params.get("PORT") or None,
        autocommit=True,
    )
    with admin:
        admin.execute(f'CREATE DATABASE "{database}"')
        try:
            yield urlsplit(url)._replace(path=f"/{database}").geturl()
        finally:
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
    """Migrate a fresh database, create a pool of users and serve the app with daphne, set up as
    ``make run`` sets it up (DEBUG off, static files collected and served by whitenoise), but
    for ``WEBSOCKET_MAX_MESSAGE_BYTES``.

    ``chunk_delay`` is the offline model's pause between streamed chunks.
    """
    name = f"browser_{uuid.uuid4().hex[:10]}"
    with (
        _database(name) as database_url,
        tempfile.TemporaryDirectory(prefix="chat-static-") as static_root,
        tempfile.TemporaryDirectory(prefix="chat-artifacts-") as artifacts_dir,
    ):
        env = {
            **{key: value for key, value in os.environ.items() if key != "DEBUG"},
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
            "DATABASE_URL": database_url,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "OFFLINE_MODEL_CHUNK_DELAY_SECONDS": str(chunk_delay),
            "GEMINI_API_KEY": "",
            "GOOGLE_API_KEY": "",
            "GOOGLE_GENAI_USE_VERTEXAI": "false",
            "BACKGROUND_TASKS": "inprocess",
            "CACHE_KEY_PREFIX": name,
            "PRODUCTION": "false",
            "STATIC_ROOT": static_root,
            "ARTIFACTS_DIR": artifacts_dir,
            **(extra_env or {}),
        }
        manage = [str(BIN / "python"), str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], env=env, check=True)
        subprocess.run([*manage, "collectstatic", "--noinput", "-v", "0"], env=env, check=True)
        script = CREATE_USERS.format(password=PASSWORD, count=USER_POOL_SIZE)
        subprocess.run([*manage, "shell", "-c", script], env=env, check=True)
        port = _free_port()
        log_path = log_dir / f"daphne-{port}.log"
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
