"""Security properties of the whole site: session cookie flags on real responses, secrets
only from the environment, and JSON errors on every API URL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from sessions_app.management.commands.ensure_demo_user import DEMO_PASSWORD
from tests.chatapp.test_settings_production import PRODUCTION_ENVIRONMENT, run_django
from tests.factories import UserFactory

PASSWORD = "correct horse battery staple"
COOKIE_SETTINGS = (
    "SESSION_COOKIE_SECURE",
    "SESSION_COOKIE_HTTPONLY",
    "SESSION_COOKIE_SAMESITE",
    "CSRF_COOKIE_SECURE",
    "CSRF_COOKIE_SAMESITE",
)


def _cookie_settings(**environment: str) -> dict:
    """The cookie settings a fresh process computes from ``environment``."""
    script = (
        "import json; from django.conf import settings as s; "
        f"print(json.dumps({{name: getattr(s, name) for name in {COOKIE_SETTINGS!r}}}))"
    )
    result = run_django(["-c", script], **environment)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _sign_in(*, secure: bool):
    """Sign in through the login form as a browser does; the response that sets the cookies."""
    UserFactory(username="ada", password=PASSWORD)
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(reverse("login"), secure=secure)
    token = page.context["csrf_token"]
    response = browser.post(
        reverse("login"),
        {"username": "ada", "password": PASSWORD, "csrfmiddlewaretoken": token},
        secure=secure,
        headers={"Referer": f"{'https' if secure else 'http'}://testserver{reverse('login')}"},
    )
    assert response.status_code == 302
    return page, response


@pytest.mark.django_db
def test_production_cookies_are_secure_httponly_and_same_site(settings):
    for name, value in _cookie_settings(**PRODUCTION_ENVIRONMENT).items():
        setattr(settings, name, value)

    page, signed_in = _sign_in(secure=True)

    session = signed_in.cookies[settings.SESSION_COOKIE_NAME]
    assert session["secure"] is True
    assert session["httponly"] is True
    assert session["samesite"] == "Lax"
    csrf = page.cookies[settings.CSRF_COOKIE_NAME]
    assert csrf["secure"] is True
    assert csrf["samesite"] == "Lax"


@pytest.mark.django_db
def test_embedded_default_cookies_are_httponly_and_same_site_over_plain_http():
    _page, signed_in = _sign_in(secure=False)

    session = signed_in.cookies[settings.SESSION_COOKIE_NAME]
    assert session["httponly"] is True
    assert session["samesite"] == "Lax"
    assert not session["secure"], "a Secure cookie would never come back over plain http"


# --- Secrets only from the environment ----------------------------------------------------

SCANNED = (
    "chatapp",
    "sessions_app",
    "memory_app",
    "access_app",
    "templates",
    "static",
    "bench",
    "docs",
)
SCANNED_FILES = (
    "Dockerfile",
    "docker-compose.yml",
    ".env.example",
    "Makefile",
    "pyproject.toml",
    "README.md",
    "mkdocs.yml",
)
SUFFIXES = {".py", ".html", ".js", ".css", ".json", ".yml", ".yaml", ".toml", ".md", ".txt", ""}
SECRET_SHAPES = {
    "Google API key": re.compile(r"AIza[0-9A-Za-z_-]{35}"),
    "AWS access key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36}\b"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "OpenAI-style key": re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    "generated Django key": re.compile(r"django-insecure-"),
    "secret assigned a literal": re.compile(
        r"""(?ix)\b[A-Z_]*(?:SECRET|PASSWORD|API_KEY|TOKEN)[A-Z_]*\s*[:=]\s*["'][^"'\s]{12,}["']"""
    ),
}
# Literals on purpose: the development key, which the system check refuses in production, and
# the demo password of `make run`, which ensure_demo_user refuses to set in production.
ALLOWED_LITERALS = {settings.INSECURE_DEVELOPMENT_SECRET_KEY, DEMO_PASSWORD}
# Fake secrets in the memory-safety evaluation sets (the golden conversations, the write
# guard's corpus of `python -m bench.memory_guard`): they are there to be refused.
NOT_SCANNED = ("memory_app/golden/", "memory_app/safety/guard_corpus.json")


def _scanned_files() -> list[Path]:
    base = Path(settings.BASE_DIR)
    files = [base / name for name in SCANNED_FILES if (base / name).exists()]
    for folder in SCANNED:
        files += [
            path
            for path in (base / folder).rglob("*")
            if path.is_file()
            and path.suffix in SUFFIXES
            and "__pycache__" not in path.parts
            and not str(path.relative_to(base)).startswith(NOT_SCANNED)
        ]
    return files


def test_no_secret_is_written_in_the_source():
    found = []
    files = _scanned_files()
    for path in files:
        text = path.read_text(errors="replace")
        for kind, shape in SECRET_SHAPES.items():
            for match in shape.finditer(text):
                if not any(allowed in match.group(0) for allowed in ALLOWED_LITERALS):
                    found.append(f"{path.relative_to(settings.BASE_DIR)}: {kind}: {match[0]}")

    assert len(files) > 50, "the scan found too few files to mean anything"
    assert found == []


def test_the_scan_recognises_the_secrets_it_looks_for():
    samples = [
        "GEMINI_API_KEY = 'AIzaSyA1234567890abcdefghijklmnopqrstuv'",
        'SECRET_KEY = "3x@mple-0f-a-real-l00king-key"',
        "DB_PASSWORD: 'hunter2hunter2hunter2'",
        "-----BEGIN RSA PRIVATE KEY-----",
    ]
    for sample in samples:
        assert any(shape.search(sample) for shape in SECRET_SHAPES.values()), sample


def test_secret_settings_are_read_from_the_environment_with_no_usable_default():
    source = (Path(settings.BASE_DIR) / "chatapp" / "settings.py").read_text()

    assert re.search(
        r'^SECRET_KEY = env\.str\("SECRET_KEY", default=INSECURE_DEVELOPMENT_SECRET_KEY\)$',
        source,
        re.MULTILINE,
    )
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        assert re.search(rf'env\.str\("{name}", default=(?:""|env\.str)', source), name


def test_the_demo_user_is_refused_with_production_settings():
    result = run_django(["manage.py", "ensure_demo_user"], **PRODUCTION_ENVIRONMENT)

    assert result.returncode != 0
    assert "No demo user with production settings" in result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    environment = {key: value for key, value in PRODUCTION_ENVIRONMENT.items()}
    del environment["SECRET_KEY"]

    result = run_django(["manage.py", "check", "--deploy"], **environment)

    assert result.returncode != 0
    assert "chatapp.E011" in result.stderr


# --- Errors under /api/ are JSON ------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/access/grants/not-a-number/revoke/"),
        ("get", "/api/no-such-thing/"),
        ("get", "/api/sessions/a/b/c/"),
    ],
)
def test_an_api_url_no_route_matches_answers_json_404(api_client, method, url):
    """Found by the REST fuzz: an id of the wrong shape missed every route and got the
    site's HTML 404 page, not the JSON error the schema documents."""
    response = getattr(api_client, method)(url)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}


@pytest.mark.django_db
def test_a_page_no_route_matches_answers_the_html_404(client):
    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
