"""Every environment installs the locked versions: the Makefile's (make run, make test, the
benchmarks, the embeddings and ADK environments), CI's (through make) and the image's. Each
lock pins, with hashes, every requirement of what it was compiled from, within its range, and
the environment running these tests holds exactly the dev lock's versions."""

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from django.conf import settings
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bench import adk_venv

ROOT = Path(settings.BASE_DIR)
LOCKS = ROOT / "requirements"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CLIENT = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?:\s*\\)?$")


def locked(name: str) -> dict[str, str]:
    """requirements/<name>: each pinned package's version, every one of them with a hash."""
    pins: dict[str, str] = {}
    hashed: set[str] = set()
    current = None
    for line in (LOCKS / name).read_text().splitlines():
        if match := PIN.match(line):
            current = canonicalize_name(match[1])
            pins[current] = match[2]
        elif "--hash=sha256:" in line and current is not None:
            hashed.add(current)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"requirements/{name}: not a hashed pin: {line!r}")
    assert pins, f"requirements/{name} pins nothing"
    assert sorted(set(pins) - hashed) == [], f"requirements/{name}: pins without a hash"
    return pins


def requirements_in(name: str) -> list[str]:
    """The requirement lines of requirements/<name> (an input file of pip-compile)."""
    lines = [line.split("#")[0].strip() for line in (LOCKS / name).read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("-")]


def project_requirements(*extras: str, project: dict = PYPROJECT) -> list[str]:
    optional = project["project"].get("optional-dependencies", {})
    return [*project["project"]["dependencies"], *(r for e in extras for r in optional[e])]


SOURCES = {
    "prod.txt": project_requirements(),
    "dev.txt": project_requirements("dev", "docs"),
    "bench.txt": project_requirements("dev", "bench"),
    "embeddings.txt": [
        *project_requirements("dev", "local-embeddings"),
        *requirements_in("embeddings.in"),
    ],
    "adk.txt": [*requirements_in("adk.in"), *project_requirements("adk", project=CLIENT)],
    "local-model.txt": requirements_in("local-model.in"),
    "uv.txt": requirements_in("uv.in"),
}


@pytest.mark.parametrize("lock", sorted(SOURCES))
def test_each_lock_pins_what_it_was_compiled_from_within_its_range(lock):
    pins = locked(lock)
    for line in SOURCES[lock]:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"requirements/{lock} does not pin {requirement}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements/{lock} pins {name}=={pins[name]}, outside {requirement.specifier}"
        )


@pytest.mark.parametrize("lock", ["prod.txt", "bench.txt", "embeddings.txt"])
def test_the_products_environments_share_the_dev_locks_versions(lock):
    dev = locked("dev.txt")
    pins = locked(lock)

    assert {name: pins[name] for name in pins if name in dev} == {
        name: dev[name] for name in pins if name in dev
    }


def test_the_embeddings_lock_holds_torchs_cpu_build_and_the_others_no_torch():
    assert locked("embeddings.txt")["torch"].startswith("2.13.0")
    assert not any(name.startswith("nvidia-") for name in locked("embeddings.txt"))
    for lock in ("prod.txt", "dev.txt", "bench.txt"):
        assert "torch" not in locked(lock)


def test_the_adk_lock_keeps_google_genai_below_3():
    pins = locked("adk.txt")

    assert pins["google-adk"] == "2.13.0"
    assert int(pins["google-genai"].split(".")[0]) < 3


def test_this_environment_holds_the_dev_locks_versions():
    """What make test installed is what dev.txt says, so a version changes only with it."""
    installed = {}
    for name in locked("dev.txt"):
        try:
            installed[name] = version(name)
        except PackageNotFoundError:
            installed[name] = None

    assert installed == locked("dev.txt")


def makefile_rule(target: str) -> str:
    """The recipe of ``target`` in the Makefile."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert match, f"no rule for {target}"
    return match[1]


def test_the_makefile_installs_only_from_the_locks():
    makefile = (ROOT / "Makefile").read_text()
    locked_install = re.search(r"^LOCKED_INSTALL = (.*)$", makefile, re.MULTILINE)[1]

    uv_locked_install = re.search(r"^UV_LOCKED_INSTALL = (.*)$", makefile, re.MULTILINE)[1]

    assert locked_install.split() == ["-m", "pip", "install", "--quiet", "--require-hashes", "-r"]
    assert uv_locked_install.split() == [
        "pip", "install", "--quiet", "--require-hashes", "--compile-bytecode",
        "--python", "$(BIN)/python", "-r",
    ]  # fmt: skip
    assert "$(LOCKED_INSTALL) requirements/uv.txt" in makefile_rule("$(BIN)/uv")
    assert "$(BIN)/uv $(UV_LOCKED_INSTALL) requirements/dev.txt" in makefile_rule(
        "$(VENV)/.installed"
    )
    assert "$(LOCKED_INSTALL) requirements/bench.txt" in makefile_rule("bench")
    assert "$(LOCKED_INSTALL) requirements/embeddings.txt" in makefile_rule(
        "$(EMBEDDINGS_VENV)/.installed"
    )
    assert "$(LOCKED_INSTALL) requirements/local-model.txt" in makefile_rule(
        "$(LOCAL_MODEL_VENV)/.installed"
    )
    assert "bench.adk_venv" in makefile_rule("test-adk")
    assert "pip install" not in makefile.replace(locked_install, "").replace(uv_locked_install, "")
    prerequisites = {
        "migrate": "install",
        "run": "migrate",
        "test": "install",
        "lint": "install",
        "bench": "install",
        "test-adk": "install",
        "test-local-embeddings": "$(EMBEDDINGS_VENV)/.installed",
        "test-local-model": "$(LOCAL_MODEL_VENV)/.installed",
    }
    for target, prerequisite in prerequisites.items():
        rule = re.search(rf"^{re.escape(target)}:(.*)$", makefile, re.MULTILINE)[1]
        assert prerequisite in rule.split(), target
    assert re.search(r"^install: \$\(VENV\)/\.installed$", makefile, re.MULTILINE)


def test_the_adk_environment_installs_its_lock_and_the_client_without_dependencies():
    source = Path(adk_venv.__file__).read_text()

    assert adk_venv.LOCK == LOCKS / "adk.txt"
    assert '_pip(python, "--require-hashes", "-r", str(LOCK))' in source
    assert '_pip(python, "--no-deps", "--force-reinstall", str(CLIENT_DIR))' in source
    assert source.count("_pip(") == 3  # its definition and the two installs


def test_the_image_installs_the_prod_lock():
    dockerfile = (ROOT / "Dockerfile").read_text()

    assert re.findall(r"pip install .*", dockerfile) == [
        "pip install --no-cache-dir --require-hashes -r requirements/prod.txt"
    ]
    assert "COPY requirements/prod.txt requirements/prod.txt" in dockerfile


def test_ci_installs_through_the_makefile_only():
    ci = (ROOT / ".ci" / "run").read_text()

    assert "pip install" not in ci
    assert {
        "make test",
        "make test-local-embeddings",
        "make test-adk",
        "make test-local-model",
    } <= set(re.findall(r"\bmake [\w-]+", ci))


def test_make_lock_and_upgrade_compile_every_lock():
    recipe = makefile_rule("lock upgrade")

    for lock in SOURCES:
        assert f"-o requirements/{lock}" in recipe
