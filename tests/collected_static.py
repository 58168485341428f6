"""The site's static files, collected once for each state of the code and shared.

``collectstatic`` starts Django and compresses every file (a few seconds of processor time),
and its output is the same for every worker and every server the tests start, so one folder
serves them all (tests/built_once.py). Its name is a digest of what the output comes from: the
project's static folder, the lock files (the installed packages' own files, such as the
admin's), the settings module, and whether the storage is production's (hashed names).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import environ

from tests.built_once import ROOT, built_once, digest_of

COLLECTED = ROOT / "build" / "test-static"


def static_root(env: Mapping[str, str]) -> Path:
    """The folder of the static files collected for ``env``; made by :func:`static_collected`."""
    production = environ.Env.parse_value(env.get("PRODUCTION", "false"), bool)
    sources = [
        *(path for path in (ROOT / "static").rglob("*") if path.is_file()),
        *(ROOT / "requirements").glob("*.txt"),
        ROOT / "chatapp" / "settings.py",
    ]
    return COLLECTED / digest_of(sources, settings=[f"PRODUCTION={production}"])


def static_collected(env: Mapping[str, str]) -> Path:
    """:func:`static_root` for ``env``, with the static files collected in it."""

    def collect(folder: Path) -> None:
        subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "collectstatic", "--noinput", "-v", "0"],
            env={**env, "STATIC_ROOT": str(folder)},
            cwd=ROOT,
            check=True,
        )

    return built_once(static_root(env), collect)
