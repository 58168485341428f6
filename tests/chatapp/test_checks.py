"""The system check that refuses settings which cannot work together."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import override_settings

from chatapp.checks import check_middleware_protections, check_settings_consistency

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


# --- Django's deploy checks of the middlewares that chatapp.loop_middleware subclasses ------

DJANGO_PROTECTIONS = {
    "chatapp.loop_middleware.SecurityMiddleware": "django.middleware.security.SecurityMiddleware",
    "chatapp.loop_middleware.SessionMiddleware": (
        "django.contrib.sessions.middleware.SessionMiddleware"
    ),
    "chatapp.loop_middleware.CsrfViewMiddleware": "django.middleware.csrf.CsrfViewMiddleware",
    "chatapp.loop_middleware.XFrameOptionsMiddleware": (
        "django.middleware.clickjacking.XFrameOptionsMiddleware"
    ),
}
SECURE = {
    "SECURE_SSL_REDIRECT": True,
    "SECURE_HSTS_SECONDS": 3600,
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
    "SECURE_HSTS_PRELOAD": True,
    "SESSION_COOKIE_SECURE": True,
    "CSRF_COOKIE_SECURE": True,
    "X_FRAME_OPTIONS": "DENY",
}
WEAKER = {
    "SECURE_SSL_REDIRECT": False,
    "SECURE_HSTS_SECONDS": 0,
    "SESSION_COOKIE_SECURE": False,
    "SESSION_COOKIE_HTTPONLY": False,
    "CSRF_COOKIE_SECURE": False,
    "X_FRAME_OPTIONS": "SAMEORIGIN",
    "SECURE_CONTENT_TYPE_NOSNIFF": False,
    "SECURE_REFERRER_POLICY": None,
}


def deploy_ids(**overrides) -> set[str]:
    """The ids ``check --deploy`` gives, silenced ones left out, with ``overrides``."""
    from django.core.checks import run_checks

    with override_settings(**overrides):
        return {
            message.id
            for message in run_checks(include_deployment_checks=True)
            if message.id not in settings.SILENCED_SYSTEM_CHECKS
        }


def test_the_loop_middlewares_are_django_classes_to_the_deploy_checks():
    assert all(path in settings.MIDDLEWARE for path in DJANGO_PROTECTIONS)

    with override_settings(**SECURE):
        assert check_middleware_protections(None) == []


def test_a_weaker_setup_is_reported_as_for_djangos_own_middlewares():
    """Every warning Django gives for its own classes is given for their subclasses too."""
    django_names = [DJANGO_PROTECTIONS.get(path, path) for path in settings.MIDDLEWARE]

    with_subclasses = deploy_ids(**WEAKER)
    with_django_classes = deploy_ids(**WEAKER, MIDDLEWARE=django_names)

    assert with_django_classes <= with_subclasses
    assert {
        "security.W004",
        "security.W006",
        "security.W008",
        "security.W012",
        "security.W015",
        "security.W016",
        "security.W019",
        "security.W022",
    } <= with_subclasses


def test_djangos_own_classes_give_nothing_twice():
    django_names = [DJANGO_PROTECTIONS.get(path, path) for path in settings.MIDDLEWARE]

    with override_settings(**WEAKER, MIDDLEWARE=django_names):
        assert check_middleware_protections(None) == []


@pytest.mark.parametrize(
    ("left_out", "expected"),
    [
        ("chatapp.loop_middleware.SecurityMiddleware", "chatapp.W101"),
        ("chatapp.loop_middleware.XFrameOptionsMiddleware", "chatapp.W102"),
        ("chatapp.loop_middleware.CsrfViewMiddleware", "chatapp.W103"),
    ],
)
def test_a_protection_left_out_is_reported(left_out, expected):
    middleware = [path for path in settings.MIDDLEWARE if path != left_out]

    with override_settings(**SECURE, MIDDLEWARE=middleware):
        ids = [message.id for message in check_middleware_protections(None)]

    assert ids == [expected]
