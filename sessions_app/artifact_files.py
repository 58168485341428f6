"""Artifacts' bytes and names: the ``artifacts`` storage, the rule a filename follows, ADK's
``artifact://`` address of a version, and removing files once their rows are gone.

Files are removed after the deleting transaction commits, by a ``post_delete`` receiver on
``ArtifactRecord``: sessions and accounts are deleted through cascades from many places (a
user's request, the idle-session sweep, deleting all of one's data), and a cascade reaches
each row's receiver where no caller of those paths has to remember the files.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Any

from django.core.files.storage import Storage, storages
from django.db import transaction

logger = logging.getLogger(__name__)

USER_PREFIX = "user:"
MAX_FILENAME_CHARS = 255


def artifact_storage() -> Storage:
    """The storage of artifact files (``STORAGES["artifacts"]``), looked up at each use so a
    changed setting (tests, a deployment's bucket) is followed."""
    return storages["artifacts"]


def artifact_filename_problem(filename: Any) -> str | None:
    """Why ``filename`` cannot name an artifact, or None.

    Any name ADK's services take (``/`` included: ``reports/2026/q1.pdf``), up to
    ``MAX_FILENAME_CHARS``, and not blank; ``user:`` before it makes it the user's rather
    than the session's. Control characters are refused: no database holds a NUL, and a
    name with a line break could not be shown or sent in a header. Storage paths never
    contain a filename, so a name needs no guard for the disk.
    """
    if not isinstance(filename, str):
        return "A filename must be a string."
    bare = filename.removeprefix(USER_PREFIX)
    if not bare.strip():
        return "A filename must not be empty."
    if len(filename) > MAX_FILENAME_CHARS:
        return f"A filename is at most {MAX_FILENAME_CHARS} characters."
    if any(unicodedata.category(char) in {"Cc", "Cs"} for char in bare):
        return "A filename must not contain control characters."
    return None


def artifact_is_user_scoped(filename: str) -> bool:
    return filename.startswith(USER_PREFIX)


def artifact_uri(
    *, app_name: str, user_id: str, session_id: str | None, filename: str, version: int
) -> str:
    """ADK's ``artifact://`` address of one version (``artifact_util.get_artifact_uri``)."""
    if session_id is None:
        return f"artifact://apps/{app_name}/users/{user_id}/artifacts/{filename}/versions/{version}"
    return (
        f"artifact://apps/{app_name}/users/{user_id}/sessions/{session_id}"
        f"/artifacts/{filename}/versions/{version}"
    )


_ARTIFACT_URI = re.compile(
    r"artifact://apps/(?P<app_name>[^/]+)/users/(?P<user_id>[^/]+)"
    r"(?:/sessions/(?P<session_id>[^/]+))?/artifacts/(?P<filename>.+)/versions/(?P<version>\d+)"
)


def artifact_uri_parse(uri: str) -> dict[str, Any] | None:
    """The parts of an ``artifact://`` address (``artifact_uri``'s inverse): app_name,
    user_id, session_id (None for a user's artifact), filename and version (an int); None
    for anything else."""
    match = _ARTIFACT_URI.fullmatch(uri or "")
    if match is None:
        return None
    return {**match.groupdict(), "version": int(match["version"])}


def artifact_file_delete(storage_name: str) -> None:
    """Remove one stored file; a failure is logged, not raised (its row is gone already, and
    the periodic walk of the storage, ``artifact_files_orphaned_delete``, finds it again)."""
    try:
        artifact_storage().delete(storage_name)
    except Exception:
        logger.exception("could not delete artifact file %s", storage_name)


def artifact_file_delete_on_commit(sender: Any, instance: Any, **kwargs: Any) -> None:
    """``post_delete`` receiver of ``ArtifactRecord`` and ``EventBlob``: the row's file goes
    once the deletion commits (a rolled-back deletion keeps both)."""
    name = instance.storage_name
    transaction.on_commit(lambda: artifact_file_delete(name), using=kwargs.get("using"))
