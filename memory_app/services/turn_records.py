"""Old turn records, retired: the memories earlier versions made of a whole user turn.

Before memories held facts only (issue 26), the offline rules kept a turn that stated no fact
of theirs as a "key conversation details" memory whose text was the turn itself, dated and
signed: "[26 November 2026] User: Write a haiku about autumn leaves.". Such a record is what
was said, not a fact about the person; the session store keeps the turn (past conversations).

:func:`turn_records_retire` is run by a data migration, with the migration's historical
models (``apps``), so it reads and writes the schema of the moment it runs at.
"""

from __future__ import annotations

import secrets

from memory_app.consolidation.writes import memory_snapshot
from memory_app.extraction.offline import fact_is_turn_record
from memory_app.models import MemoryStatus
from memory_app.topics import KEY_CONVERSATION_DETAILS

RETIRED_REASON = (
    "A record of what you said, not a fact about you: retired on upgrade. The chat keeps what "
    "was said, and replies that reference past chats still find it."
)
CHUNK = 500


def turn_records_retire(*, apps) -> int:
    """Retire every turn record, whatever its status, and return how many.

    A retired record leaves the Memory page, the API, MCP and recall, and cannot be corrected
    or restored back; its sources and revisions stay, with a ``retired`` revision saying why.
    No fact is read out of a record here: an old turn read as new would pass over a
    correction made since (consolidation takes what it is given as the newest word), and the
    turn itself stays in the session store, where past conversations find it. Running it
    twice changes nothing the second time."""
    Memory = apps.get_model("memory_app", "Memory")
    MemoryRevision = apps.get_model("memory_app", "MemoryRevision")
    MemorySettings = apps.get_model("memory_app", "MemorySettings")

    candidates = (
        Memory.objects.filter(
            topic=KEY_CONVERSATION_DETAILS, text__regex=r"^\[[0-9]{1,2} [A-Z][a-z]+ [0-9]{4}\] "
        )
        .exclude(status=MemoryStatus.RETIRED)
        .order_by("created_at", "id")
    )
    retired = 0
    owners: set[int] = set()
    for record in candidates.iterator(chunk_size=CHUNK):
        if not fact_is_turn_record(text=record.text, topic=record.topic):
            continue
        before = memory_snapshot(record)
        record.status = MemoryStatus.RETIRED
        record.save(update_fields=["status", "updated_at"])
        MemoryRevision.objects.create(
            memory=record,
            action="retired",
            before=before,
            after=memory_snapshot(record),
            reason=RETIRED_REASON,
            actor_job_id=record.job_id,
        )
        retired += 1
        if record.user_id is not None:
            owners.add(record.user_id)
    MemorySettings.objects.filter(user_id__in=owners).update(index_version=secrets.randbits(63))
    return retired
