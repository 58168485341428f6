"""docker-compose.yml and the Dockerfile name things that exist and start in the right order."""

import re
import tomllib

import pytest
import yaml
from celery import Celery
from celery.app.utils import find_app
from celery.utils.imports import symbol_by_name
from daphne.utils import import_by_path
from django.conf import settings
from django_celery_beat.schedulers import DatabaseScheduler

ROOT = settings.BASE_DIR
APP_SERVICES = ("web", "worker", "beat")


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def option_value(command: list[str], option: str) -> str:
    return command[command.index(option) + 1]


def test_the_five_services_are_defined(services):
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    assert services["postgres"]["image"] == "postgres:15"
    assert services["redis"]["image"] == "redis:7"


@pytest.mark.parametrize("name", ["postgres", "redis"])
def test_backing_services_have_healthchecks(services, name):
    healthcheck = services[name]["healthcheck"]

    assert healthcheck["test"][0] in ("CMD", "CMD-SHELL")
    assert healthcheck["retries"] >= 1


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_wait_for_healthy_backing_services_and_migrations(services, name):
    depends_on = services[name]["depends_on"]

    assert depends_on["postgres"]["condition"] == "service_healthy"
    assert depends_on["redis"]["condition"] == "service_healthy"
    assert depends_on["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_app_services_share_one_environment_of_variables_settings_reads(services):
    environments = [services[name]["environment"] for name in (*APP_SERVICES, "migrate")]
    read_by_settings = set(
        re.findall(r'env\.\w+\(\s*"([A-Z_]+)"', (ROOT / "chatapp" / "settings.py").read_text())
    )

    assert all(environment == environments[0] for environment in environments)
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PRODUCTION", "ALLOWED_HOSTS"} <= set(
        environments[0]
    )
    assert set(environments[0]) <= read_by_settings
    assert environments[0]["DATABASE_URL"].startswith("postgres://")
    assert environments[0]["PRODUCTION"] == "true"


def test_web_serves_the_asgi_application_with_daphne(services):
    command = services["web"]["command"]

    assert command[0] == "daphne"
    assert callable(import_by_path(command[-1]))


@pytest.mark.parametrize(("name", "subcommand"), [("worker", "worker"), ("beat", "beat")])
def test_celery_services_run_the_project_app(services, name, subcommand):
    command = services[name]["command"]

    assert command[0] == "celery"
    assert subcommand in command
    app = find_app(option_value(command, "-A"))
    assert isinstance(app, Celery)
    assert app.main == "chatapp"


def test_beat_keeps_its_schedule_in_the_database(services):
    scheduler = option_value(services["beat"]["command"], "--scheduler")

    assert scheduler.replace(":", ".") == settings.CELERY_BEAT_SCHEDULER.replace(":", ".")
    assert issubclass(symbol_by_name(scheduler), DatabaseScheduler)


def test_migrate_runs_django_migrations(services):
    assert services["migrate"]["command"][:3] == ["python", "manage.py", "migrate"]
    assert services["migrate"]["restart"] == "no"


def test_dockerfile_builds_on_a_supported_python_and_collects_static_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]

    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    assert requires == ">=3.11"
    assert "pip install --no-cache-dir ." in dockerfile
    assert "manage.py collectstatic" in dockerfile
