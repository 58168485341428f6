"""Production settings: what ``PRODUCTION=true`` turns on, ``check --deploy`` clean, HTTPS
behind a proxy, and static files collected and served by whitenoise."""

import json
import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import Client

# The variables a production environment sets (compose's shared block, .env.example).
PRODUCTION_ENVIRONMENT = {
    "PRODUCTION": "true",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "DATABASE_URL": "postgres://chatapp:chatapp@postgres:5432/chatapp",
    "REDIS_URL": "redis://redis:6379/0",
    "ALLOWED_HOSTS": "chat.example.com,chat-internal.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://chat.example.com",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
}
APP_VARIABLES = (
    "DEBUG",
    "PRODUCTION",
    "SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "BACKGROUND_TASKS",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "STATIC_ROOT",
    "LOG_FORMAT",
)


def run_django(arguments: list[str], **environment: str) -> subprocess.CompletedProcess:
    """``python <arguments>`` in a new process with only ``environment`` of the app's variables."""
    inherited = {key: value for key, value in os.environ.items() if key not in APP_VARIABLES}
    inherited = {key: value for key, value in inherited.items() if not key.startswith("SECURE_")}
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=settings.BASE_DIR,
        env={
            **inherited,
            "PYTHONPATH": str(settings.BASE_DIR),
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
            **environment,
        },
        capture_output=True,
        text=True,
        timeout=180,
    )


def settings_of(**environment: str) -> dict:
    script = (
        "import json; from django.conf import settings as s; "
        "print(json.dumps({name: getattr(s, name) for name in ("
        "'DEBUG', 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SESSION_COOKIE_HTTPONLY', "
        "'SECURE_SSL_REDIRECT', 'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS', "
        "'SECURE_HSTS_PRELOAD', 'SECURE_PROXY_SSL_HEADER', 'ALLOWED_HOSTS', "
        "'CSRF_TRUSTED_ORIGINS')} | {'static': s.STORAGES['staticfiles']['BACKEND']}))"
    )
    result = run_django(["-c", script], **environment)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_production_turns_on_https_and_secure_cookies():
    values = settings_of(**PRODUCTION_ENVIRONMENT)

    assert values["DEBUG"] is False
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
    assert values["SESSION_COOKIE_HTTPONLY"] is True
    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SECURE_HSTS_SECONDS"] == 365 * 24 * 3600
    assert values["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["ALLOWED_HOSTS"] == ["chat.example.com", "chat-internal.example.com"]
    assert values["CSRF_TRUSTED_ORIGINS"] == ["https://chat.example.com"]
    assert values["static"] == "whitenoise.storage.CompressedManifestStaticFilesStorage"


def test_each_https_setting_can_be_set_on_its_own():
    values = settings_of(
        **{
            **PRODUCTION_ENVIRONMENT,
            "SECURE_SSL_REDIRECT": "false",
            "SECURE_HSTS_SECONDS": "3600",
            "SECURE_HSTS_PRELOAD": "false",
            "SECURE_PROXY_SSL_HEADER": "",
        }
    )

    assert values["SECURE_SSL_REDIRECT"] is False
    assert values["SECURE_HSTS_SECONDS"] == 3600
    assert values["SECURE_HSTS_PRELOAD"] is False
    assert values["SECURE_PROXY_SSL_HEADER"] is None


def test_the_embedded_default_stays_usable_over_plain_http():
    values = settings_of()

    assert values["DEBUG"] is False
    assert values["SESSION_COOKIE_SECURE"] is False
    assert values["SECURE_SSL_REDIRECT"] is False
    assert values["SECURE_HSTS_SECONDS"] == 0


def test_check_deploy_is_clean_with_production_settings():
    result = run_django(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **PRODUCTION_ENVIRONMENT
    )

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_check_deploy_warns_when_https_is_turned_off():
    """The clean result above means something: the same check catches a weaker setup."""
    result = run_django(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        **PRODUCTION_ENVIRONMENT,
        SESSION_COOKIE_SECURE="false",
        SECURE_HSTS_SECONDS="0",
        SECURE_SSL_REDIRECT="false",
        CSRF_COOKIE_SECURE="false",
    )

    assert result.returncode != 0
    for setting in (
        "SESSION_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_SSL_REDIRECT",
        "CSRF_COOKIE_SECURE",
    ):
        assert setting in result.stderr


@pytest.fixture
def behind_a_tls_proxy(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.ALLOWED_HOSTS = ["chat.example.com"]


def test_plain_http_is_redirected_to_https(behind_a_tls_proxy):
    response = Client(HTTP_HOST="chat.example.com").get("/accounts/login/")

    assert response.status_code == 301
    assert response["Location"] == "https://chat.example.com/accounts/login/"


def test_https_through_the_proxy_is_served_with_hsts(behind_a_tls_proxy):
    response = Client(HTTP_HOST="chat.example.com", HTTP_X_FORWARDED_PROTO="https").get(
        "/accounts/login/"
    )

    assert response.status_code == 200
    assert response["Strict-Transport-Security"] == "max-age=3600; includeSubDomains"


@pytest.fixture(scope="module")
def collected_static(tmp_path_factory) -> str:
    """``collectstatic`` as the Dockerfile runs it, into a folder of this test module."""
    static_root = tmp_path_factory.mktemp("staticfiles")
    result = run_django(
        ["manage.py", "collectstatic", "--noinput"],
        PRODUCTION="true",
        DEBUG="false",
        SECRET_KEY="collectstatic",
        STATIC_ROOT=str(static_root),
    )
    assert result.returncode == 0, result.stderr
    return static_root


def test_collectstatic_writes_hashed_compressed_files_and_a_manifest(collected_static):
    manifest = json.loads((collected_static / "staticfiles.json").read_text())["paths"]

    assert "chat.js" in manifest or any(name.endswith(".js") for name in manifest)
    hashed = next(iter(manifest.values()))
    assert (collected_static / hashed).is_file()
    assert (collected_static / f"{hashed}.gz").is_file()


def test_whitenoise_serves_the_hashed_files_with_a_long_cache(collected_static, settings):
    settings.DEBUG = False
    settings.STATIC_ROOT = collected_static
    settings.WHITENOISE_USE_FINDERS = False
    settings.WHITENOISE_AUTOREFRESH = False
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    manifest = json.loads((collected_static / "staticfiles.json").read_text())["paths"]
    hashed = next(name for name in manifest.values() if name.endswith(".js"))

    response = Client().get(f"/static/{hashed}", HTTP_ACCEPT_ENCODING="gzip")

    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "immutable" in response["Cache-Control"]
