"""The layers of the code base hold: chatapp > agents_app > memory_app > sessions_app >
access_app > core, no module importing from a layer above its own (import-linter's contract in
pyproject.toml, lazy imports inside functions included)."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# In a process of its own: Django's start-up (daphne's twisted, zope.interface) changes classes
# in a way import-linter's option check trips over.
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def test_no_module_imports_from_a_layer_above_it():
    result = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_the_layers_contract_hides_no_violation():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    assert contract["layers"] == [
        "chatapp",
        "agents_app",
        "memory_app",
        "sessions_app",
        "access_app",
        "core",
    ]
    assert "ignore_imports" not in contract
    assert set(config["root_packages"]) == set(contract["layers"])
