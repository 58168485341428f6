"""The system check that refuses settings which cannot work together."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import override_settings

from chatapp.checks import check_settings_consistency

# The check only reads DATABASES; no connection is made with the overridden value.
pytestmark = pytest.mark.filterwarnings("ignore:Overriding setting DATABASES:UserWarning")

REDIS_CHANNELS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
IN_MEMORY_CHANNELS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
POSTGRES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "chatapp"}}
SQLITE = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}

PRODUCTION_LIKE = {
    "PRODUCTION": True,
    "DEBUG": False,
    "SECRET_KEY": "a-real-secret-from-the-environment",
    "BACKGROUND_TASKS": "celery",
    "CELERY_BROKER_URL": "redis://redis:6379/0",
    "CHANNEL_LAYERS": REDIS_CHANNELS,
    "DATABASES": POSTGRES,
}
EMBEDDED = {
    "PRODUCTION": False,
    "DEBUG": True,
    "BACKGROUND_TASKS": "inprocess",
    "CELERY_BROKER_URL": "memory://",
    "CHANNEL_LAYERS": IN_MEMORY_CHANNELS,
    "DATABASES": SQLITE,
}


def error_ids(**overrides) -> list[str]:
    with override_settings(**overrides):
        return [error.id for error in check_settings_consistency(None)]


def test_the_embedded_default_passes():
    assert error_ids(**EMBEDDED) == []


def test_the_settings_this_suite_runs_with_pass():
    assert check_settings_consistency(None) == []


def test_a_consistent_production_setup_passes():
    assert error_ids(**PRODUCTION_LIKE) == []


def test_a_proxy_header_as_django_names_it_passes():
    assert (
        error_ids(**PRODUCTION_LIKE, SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"))
        == []
    )


def test_distributed_without_production_flag_passes():
    assert error_ids(**{**PRODUCTION_LIKE, "PRODUCTION": False, "DEBUG": True}) == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({**EMBEDDED, "BACKGROUND_TASKS": "threads"}, ["chatapp.E001"], id="E001"),
        pytest.param({**EMBEDDED, "LOG_FORMAT": "xml"}, ["chatapp.E004"], id="E004-log-format"),
        pytest.param({**EMBEDDED, "LLM_PROVIDER": "olama"}, ["chatapp.E006"], id="E006-provider"),
        pytest.param(
            {**EMBEDDED, "MEMORY_EMBEDDER": "openai", "MEMORY_OPENAI_EMBEDDING_MODEL": ""},
            ["chatapp.E007"],
            id="E007-openai-embedder-without-model",
        ),
        pytest.param(
            {**EMBEDDED, "SECURE_PROXY_SSL_HEADER": ("X-Forwarded-Proto",)},
            ["chatapp.E005"],
            id="E005-proxy-header-without-value",
        ),
        pytest.param(
            {**EMBEDDED, "SECURE_PROXY_SSL_HEADER": ("X-Forwarded-Proto", "https")},
            ["chatapp.E005"],
            id="E005-proxy-header-not-as-django-names-it",
        ),
        pytest.param(
            {**PRODUCTION_LIKE, "PRODUCTION": False, "CELERY_BROKER_URL": "memory://"},
            ["chatapp.E002"],
            id="E002-celery-with-in-process-broker",
        ),
        pytest.param(
            {**PRODUCTION_LIKE, "PRODUCTION": False, "CHANNEL_LAYERS": IN_MEMORY_CHANNELS},
            ["chatapp.E003"],
            id="E003-celery-with-in-process-channel-layer",
        ),
        pytest.param({**PRODUCTION_LIKE, "DEBUG": True}, ["chatapp.E010"], id="E010-debug"),
        pytest.param(
            {**PRODUCTION_LIKE, "SECRET_KEY": settings.INSECURE_DEVELOPMENT_SECRET_KEY},
            ["chatapp.E011"],
            id="E011-development-secret-key",
        ),
        pytest.param(
            {
                **PRODUCTION_LIKE,
                "BACKGROUND_TASKS": "inprocess",
                "CHANNEL_LAYERS": IN_MEMORY_CHANNELS,
            },
            ["chatapp.E012"],
            id="E012-in-process-channel-layer",
        ),
        pytest.param({**PRODUCTION_LIKE, "DATABASES": SQLITE}, ["chatapp.E013"], id="E013-sqlite"),
        pytest.param(
            {**EMBEDDED, "PRODUCTION": True},
            ["chatapp.E010", "chatapp.E011", "chatapp.E012", "chatapp.E013"],
            id="embedded-defaults-marked-production",
        ),
    ],
)
def test_inconsistent_settings_are_refused(overrides, expected):
    assert error_ids(**overrides) == expected


def manage_py_check(**environment: str) -> subprocess.CompletedProcess:
    """``manage.py check`` in a new process, with only ``environment`` of the app's variables."""
    inherited = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DEBUG", "PRODUCTION", "DATABASE_URL", "REDIS_URL", "BACKGROUND_TASKS")
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env={**inherited, **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_manage_py_check_passes_on_the_embedded_default():
    result = manage_py_check()

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_manage_py_check_refuses_debug_in_production():
    result = manage_py_check(PRODUCTION="true", DEBUG="true")

    assert result.returncode != 0
    assert "chatapp.E010" in result.stderr
    assert "DEBUG is on with production settings" in result.stderr
