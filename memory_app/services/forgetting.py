"""A person asks, in a chat, to forget something ("forget that my sister lives in Braga",
"delete what you know about my job"): the memories of theirs it names go, through the same
deletion as the Memory page's Delete (:func:`memory_delete`: under the user's lock, the text
gone with its history, a notice to open pages, a log line naming who asked).

Only the person's own memories are ever candidates (their user- and session-scope ones; never
the app's shared memories, never another person's, whatever ids a message carries). A request
that could mean several memories forgets none of them and returns them, for the agent to ask
which, unless it asked for everything about the subject.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_app.models import Memory, MemoryStatus
from memory_app.ranking import tokenize
from memory_app.selectors.memories import user_memories, user_memories_matching
from memory_app.services.memories import memory_delete

CANDIDATES = 20
# Words of a request that name no part of what is to be forgotten.
_REQUEST_WORDS = frozenset(tokenize("user forget remember delete know everything anything"))


@dataclass(frozen=True)
class ForgetRequestReport:
    """What a request to forget did: the texts of the memories it forgot, or, when it could
    mean several and did not ask for all, those it could mean (id and text), forgetting none."""

    forgotten: list[str] = field(default_factory=list)
    choices: list[tuple[str, str]] = field(default_factory=list)


def _named_terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text)) - _REQUEST_WORDS


def _meant(*, app_name: str, user_pk: int, about: str) -> list[Memory]:
    """The person's active or held memories that hold every word the request names, found by
    the same retrieval as the Memory page's search and kept only when they hold them all."""
    wanted = _named_terms(about)
    if not wanted:
        return []
    found = user_memories_matching(
        app_name=app_name, user_pk=user_pk, query=about, limit=CANDIDATES
    )
    return [
        memory
        for memory in found
        if memory.status in (MemoryStatus.ACTIVE, MemoryStatus.QUARANTINED)
        and wanted <= frozenset(tokenize(memory.text))
    ]


def memories_forget_requested(
    *,
    app_name: str,
    user_pk: int,
    about: str,
    everything: bool = False,
    memory_ids: Sequence[str] = (),
) -> ForgetRequestReport:
    """Forget the person's memories ``about`` names (every named word in the memory), or those
    of ``memory_ids`` (a choice among what an earlier request offered; ids of memories not the
    person's are ignored). With several matches and neither ``everything`` nor ids, nothing
    is forgotten and the matches are returned as choices."""
    if memory_ids:
        chosen = list(
            user_memories(app_name=app_name, user_pk=user_pk, memory_ids=list(memory_ids)).filter(
                status__in=[MemoryStatus.ACTIVE, MemoryStatus.QUARANTINED]
            )
        )
    else:
        chosen = _meant(app_name=app_name, user_pk=user_pk, about=about)
        if len(chosen) > 1 and not everything:
            return ForgetRequestReport(choices=[(str(m.pk), m.text) for m in chosen])
    forgotten = [
        memory.text
        for memory in chosen
        if memory_delete(
            app_name=app_name, user_pk=user_pk, memory_id=str(memory.pk), actor_user_pk=user_pk
        )
    ]
    return ForgetRequestReport(forgotten=forgotten)
