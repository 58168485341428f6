"""The profile's ``user:`` keys, derived from the profile memories.

A profile memory (one whose ``structured`` holds a field of
:mod:`memory_app.extraction.profile`) is the source of truth: it has provenance, a history,
and consolidation decides between two of them (a correction wins). The ``user:`` key of the
same field (``user:name``, ``user:location``, ``user:family`` ...) is what the agent reads
(templating, the prompt's profile section, ``get_session``); it is rewritten from the memories
whenever one of them is saved or deleted, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory_app.extraction.profile import PROFILE_FIELDS
from memory_app.selectors import profile_active
from sessions_app.services import user_state_put


def profile_state_sync(
    *, app_name: str, user_pk: int, fields: Iterable[str], create: bool = True
) -> None:
    """Make the user's ``user:`` keys of ``fields`` say what their profile memories say: set
    from the memories that hold the field, deleted when none does. ``create`` False: a
    deletion, which only rewrites or removes keys (see ``user_state_put``)."""
    wanted = [field for field in PROFILE_FIELDS if field in set(fields)]
    if not wanted:
        return
    profile = profile_active(app_name=app_name, user_pk=user_pk)
    user_state_put(
        app_name=app_name,
        user_pk=user_pk,
        values={field: profile[field] for field in wanted if field in profile},
        removed=[field for field in wanted if field not in profile],
        create=create,
    )
