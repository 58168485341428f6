"""docker-compose.yml, the Dockerfile and .env.example name things that exist, start in the
right order and are documented. No Docker engine runs here, so the files are parsed."""

import json
import re
import shlex
import tomllib

import pytest
import yaml
from celery import Celery
from celery.app.utils import find_app
from celery.utils.imports import symbol_by_name
from daphne.utils import import_by_path
from django.conf import settings
from django.core.management import get_commands
from django_celery_beat.schedulers import DatabaseScheduler

from chatapp.middleware import PROBES

ROOT = settings.BASE_DIR
APP_SERVICES = ("web", "worker", "beat")
# Read by libraries (numpy, torch), not by settings: one thread per process.
THREAD_LIMITS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# Read by docker-compose.yml itself, for the postgres service and DATABASE_URL.
COMPOSE_VARIABLES = {"POSTGRES_PASSWORD"}


def read_by_settings() -> set[str]:
    return set(
        re.findall(r'env\.\w+\(\s*"([A-Z0-9_]+)"', (ROOT / "chatapp" / "settings.py").read_text())
    )


def configuration_page_variables() -> set[str]:
    """The variables docs/configuration.md's table describes (tests/test_docs.py holds them to
    settings.py)."""
    return set(yaml.safe_load((ROOT / "docs" / "configuration.yml").read_text()))


def env_example_variables() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, re.MULTILINE))


def interpolated(value: str) -> set[str]:
    """Variables a compose value takes from the environment or .env: ${NAME...}."""
    return set(re.findall(r"\$\{([A-Z0-9_]+)", value))


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def option_value(command: list[str], option: str) -> str:
    return command[command.index(option) + 1]


def test_the_five_services_are_defined(services):
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    assert services["postgres"]["image"] == "pgvector/pgvector:pg15", "PostgreSQL 15 with pgvector"
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
    environment = environments[0]

    assert all(each == environment for each in environments)
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PRODUCTION", "ALLOWED_HOSTS"} <= set(
        environment
    )
    assert set(environment) - set(THREAD_LIMITS) <= read_by_settings()
    assert environment["DATABASE_URL"].startswith("postgres://")
    assert environment["PRODUCTION"] == "true"
    assert environment["LOG_FORMAT"] == "json"
    assert {name: environment[name] for name in THREAD_LIMITS} == THREAD_LIMITS


def test_app_services_also_take_the_env_file(services):
    for name in (*APP_SERVICES, "migrate"):
        assert services[name]["env_file"] == [{"path": ".env", "required": False}]


def test_every_variable_the_compose_file_uses_is_documented(services):
    """In docs/configuration.md's table (settings' variables) and in .env.example (all)."""
    environment = services["web"]["environment"]
    used = set(environment) | {
        name for value in environment.values() for name in interpolated(str(value))
    }
    for service in services.values():
        for value in (service.get("environment") or {}).values():
            used |= interpolated(str(value))

    assert sorted(used - env_example_variables()) == []
    described = configuration_page_variables()
    assert sorted(used - set(THREAD_LIMITS) - COMPOSE_VARIABLES - described) == []


def test_env_example_lists_every_variable_settings_reads_and_no_other():
    documented = env_example_variables()

    assert sorted(read_by_settings() - documented) == [], "read by settings, not in .env.example"
    assert sorted(documented - read_by_settings() - set(THREAD_LIMITS) - COMPOSE_VARIABLES) == []


def test_env_example_sets_nothing_by_itself():
    """Copied to .env as it is, it changes no setting (make run reads .env too)."""
    lines = (ROOT / ".env.example").read_text().splitlines()

    assert [line for line in lines if line and not line.startswith("#")] == []


def test_web_serves_the_asgi_application_with_the_projects_daphne(services):
    """chatapp.webserver: daphne, answering a WebSocket message of any length."""
    command = services["web"]["command"]

    assert command[:3] == ["python", "-m", "chatapp.webserver"]
    assert callable(import_by_path(command[-1]))
    assert option_value(command, "--port") == "8000"
    # daphne's --proxy-headers takes the left-most X-Forwarded-For entry, the client's own:
    # the app reads the header itself, through TRUSTED_PROXIES (core.rate_limits).
    assert "--proxy-headers" not in command
    assert option_value(command, "--verbosity") == "0", "the app writes the access log"


def test_web_healthcheck_calls_the_liveness_probe(services):
    healthcheck = services["web"]["healthcheck"]
    script = healthcheck["test"][healthcheck["test"].index("-c") + 1]

    url = re.search(r"'(http://127\.0\.0\.1:(\d+)(/\w+))'", script)
    assert url.group(2) == option_value(services["web"]["command"], "--port")
    assert url.group(3) in PROBES
    compile(script, "healthcheck", "exec")


def test_worker_healthcheck_pings_this_worker_of_the_project_app(services):
    test = services["worker"]["healthcheck"]["test"]
    command = shlex.split(test[1])

    assert test[0] == "CMD-SHELL"
    assert command[:5] == ["celery", "-A", "chatapp", "inspect", "ping"]
    assert find_app(command[2]).main == "chatapp"
    assert option_value(command, "--destination") == "celery@$$HOSTNAME"


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
    command = services["migrate"]["command"]

    assert command[:2] == ["python", "manage.py"]
    assert command[2] == "migrate"
    assert get_commands()[command[2]] == "django.core"
    assert (ROOT / command[1]).is_file()
    assert services["migrate"]["restart"] == "no"


def test_redis_keeps_nothing_on_disk(services):
    command = services["redis"]["command"]

    assert option_value(command, "--save") == ""
    assert option_value(command, "--appendonly") == "no"


def test_dockerfile_builds_on_a_supported_python_and_collects_static_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]

    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    assert requires == ">=3.11"
    assert "manage.py collectstatic" in dockerfile


def test_the_image_runs_as_a_user_without_write_access_to_the_code():
    dockerfile = (ROOT / "Dockerfile").read_text()
    instructions = [line.split()[0] for line in dockerfile.splitlines() if line[:1].isupper()]

    assert re.search(r"^USER app$", dockerfile, re.MULTILINE)
    assert instructions[-3:] == ["USER", "EXPOSE", "CMD"], "nothing runs as root after USER"
    # The one folder the app user may write is where attachments are kept, outside the code.
    assert re.findall(r"chown\s+\S+\s+(\S+)", dockerfile) == ["/data/artifacts"]
    assert re.search(r"^ENV .*PYTHONPATH=/app", dockerfile, re.MULTILINE | re.DOTALL)


def test_the_images_command_serves_as_the_web_service_does(services):
    dockerfile = (ROOT / "Dockerfile").read_text()
    command = re.search(r"^CMD (\[.*?\])$", dockerfile, re.MULTILINE | re.DOTALL)[1]

    assert json.loads(command.replace("\\\n", "")) == services["web"]["command"]


def test_the_image_leaves_out_local_state():
    ignored = (ROOT / ".dockerignore").read_text().split()

    assert {".git", ".venv", "build", ".env"} <= set(ignored)


def test_compose_has_no_default_for_a_secret():
    """A forgotten .env must stop `docker compose up`, not start with a guessable secret."""
    text = (ROOT / "docker-compose.yml").read_text()
    for name in ("SECRET_KEY", "POSTGRES_PASSWORD"):
        uses = re.findall(r"\$\{" + name + r"([^}]*)\}", text)
        assert uses, f"{name} is not used by docker-compose.yml"
        assert all(use.startswith(":?") for use in uses), f"{name} has a default: {uses}"


def _seconds(duration: str) -> float:
    """A compose duration ("30s", "1m30s") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts and duration, f"not a compose duration: {duration!r}"
    return sum(
        int(value) * units[unit] for value, unit in zip(parts.groups(), "hms", strict=True) if value
    )


def test_web_is_given_its_turn_grace_period_and_the_time_to_store_the_rest(services):
    """docker compose sends SIGTERM, then SIGKILL after stop_grace_period: the web process
    needs TURN_SHUTDOWN_GRACE_SECONDS for its turns, then up to CUT_SHORT_SECONDS to store the
    rest as interrupted and close the sockets."""
    from core.shutdown import CUT_SHORT_SECONDS

    web = services["web"]
    grace = float(web["environment"]["TURN_SHUTDOWN_GRACE_SECONDS"])

    assert _seconds(web["stop_grace_period"]) == grace + CUT_SHORT_SECONDS
    for name in ("worker", "beat", "migrate"):
        assert "stop_grace_period" not in services[name]
