"""google-adk's own virtual environment, build/adk-venv: the benchmarks' peer and the ADK client's.

google-adk 2.13 needs google-genai < 3 and the product needs 3.x, so ADK never
runs in the product's environment. This one environment holds the versions locked
in requirements/adk.txt (google-adk with its database extra, on asyncpg for
PostgreSQL, the client's dependencies, and pytest for the client's suite) and the
client package ``clients/python``, installed as a user installs it (not
editable). The benchmarks create it on first use; ``make test-adk`` refreshes it
before the suite:

    python -m bench.adk_venv        # create or refresh it; prints its interpreter

A change of the lock rebuilds it; a change of the client's files reinstalls the
client.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
ADK_VENV = BASE_DIR / "build" / "adk-venv"
CLIENT_DIR = BASE_DIR / "clients" / "python"
LOCK = BASE_DIR / "requirements" / "adk.txt"


def client_fingerprint() -> str:
    """A digest of every file the client's installation is built from."""
    digest = hashlib.sha256()
    files = [CLIENT_DIR / "pyproject.toml", CLIENT_DIR / "README.md"]
    files += sorted((CLIENT_DIR / "agent_memory_client").rglob("*.py"))
    for path in files:
        digest.update(str(path.relative_to(CLIENT_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _pip(python: Path, *arguments: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *arguments], check=True)


def adk_python() -> Path:
    """The environment's interpreter, creating or refreshing the environment first if needed."""
    python = ADK_VENV / "bin" / "python"
    marker = ADK_VENV / ".installed"
    lock = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    wanted = {"lock": lock, "client": client_fingerprint()}
    installed = json.loads(marker.read_text()) if marker.exists() else {}
    if installed == wanted:
        return python
    where = ADK_VENV.relative_to(BASE_DIR)
    if installed.get("lock") != lock or not python.exists():
        print(f"Creating {where} from {LOCK.relative_to(BASE_DIR)} and the client", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(ADK_VENV)], check=True)
        _pip(python, "--require-hashes", "-r", str(LOCK))
    else:
        print(f"Reinstalling the client in {where}", flush=True)
    _pip(python, "--no-deps", "--force-reinstall", str(CLIENT_DIR))
    marker.write_text(json.dumps(wanted))
    return python


if __name__ == "__main__":
    print(adk_python())
