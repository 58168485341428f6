"""What the servers the tests start need, made once for each state of the code.

A migrated database or a folder of collected static files takes a Django start and seconds of
processor time to make, and comes out the same for every server of one run (and of the next,
until the code changes). The first server to need one makes it under a lock the pytest-xdist
workers share; the others wait for it and use it. What has not been used for a day is removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_KEPT_SECONDS = 24 * 3600


def digest_of(paths: Iterable[Path], *, settings: Iterable[str] = ()) -> str:
    """A name for what was made from these files (their names relative to the repository and
    their contents) and these settings (lines such as ``NAME=value``)."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    for setting in settings:
        digest.update(f"{setting}\0".encode())
    return digest.hexdigest()[:24]


def built_once(
    target: Path, build: Callable[[Path], None], *, stale: Callable[[Path], bool] | None = None
) -> Path:
    """``target`` (a file or a folder), made by ``build`` unless it is there already.

    ``build`` fills a scratch path beside ``target``, which then takes its place at once, so
    no one ever sees half of it. ``target``'s name must say what state of the code it was made
    for: nothing here checks that it is still right. ``stale`` says whether a ``target`` that
    stands for something kept elsewhere (a database on a server) lost it: it is made again.
    """
    folder = target.parent
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists() or (stale is not None and stale(target)):
            _prune(folder)
            scratch = folder / f"{target.stem}.building{target.suffix}"
            _remove(scratch)
            build(scratch)
            os.replace(scratch, target)
        target.touch()
    return target


def _prune(folder: Path) -> None:
    for path in folder.iterdir():
        if time.time() - path.stat().st_mtime > _KEPT_SECONDS:
            _remove(path)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
