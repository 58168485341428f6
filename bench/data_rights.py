"""Export and deletion of all of one user's data, at a size a long-time user reaches.

    DATABASE_URL=sqlite:///build/bench-data.sqlite3 python manage.py migrate
    DATABASE_URL=sqlite:///build/bench-data.sqlite3 python -m bench.data_rights \\
        [--sessions 50] [--events 400] [--memories 2000] [--text-bytes 800]

Writes one user (``bench-data-rights-...``) with ``sessions`` x ``events`` stored events of
about ``text-bytes`` each and ``memories`` memories with a source each, straight into the
tables. Then streams the export as the download does and reports its size and time, and, in a
second pass, the peak of Python's heap while streaming (tracemalloc): a streamed export's peak
stays near a chunk of rows whatever the size of the document. Last, ``user_data_delete``
with the account, timed. Figures on stdout; nothing is asserted.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

import argparse
import json
import time
import tracemalloc
import uuid

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from chatapp.selectors import user_data_export  # noqa: E402
from chatapp.services import user_data_delete  # noqa: E402
from memory_app.models import Memory, MemorySource, SourceType  # noqa: E402
from sessions_app.models import EventRecord, SessionRecord  # noqa: E402


def build(*, sessions: int, events: int, memories: int, text_bytes: int):
    user = get_user_model().objects.create(username=f"bench-data-rights-{uuid.uuid4().hex[:8]}")
    filler = ("lorem ipsum dolor sit amet " * (text_bytes // 27 + 1))[:text_bytes]
    first_events = []
    for number in range(sessions):
        record = SessionRecord.objects.create(
            session_id=uuid.uuid4().hex, app_name="chat", user=user, last_update_time=time.time()
        )
        rows = [
            EventRecord(
                session=record,
                user=user,
                app_name=record.app_name,
                sequence=sequence,
                event_id=uuid.uuid4().hex,
                invocation_id=f"inv-{sequence}",
                author="user" if sequence % 2 else "assistant",
                timestamp=time.time(),
                content={"role": "user", "parts": [{"text": f"{number}/{sequence} {filler}"}]},
                actions={},
            )
            for sequence in range(1, events + 1)
        ]
        EventRecord.objects.bulk_create(rows, batch_size=500)
        SessionRecord.objects.filter(pk=record.pk).update(last_sequence=events)
        first_events.append(EventRecord.objects.get(session=record, sequence=1))
    made = Memory.objects.bulk_create(
        [
            Memory(
                app_name="chat",
                user=user,
                text=f"fact {number}: {filler[:120]}",
                source_type=SourceType.IMPLICIT,
            )
            for number in range(memories)
        ],
        batch_size=500,
    )
    MemorySource.objects.bulk_create(
        [
            MemorySource(memory=memory, event=first_events[number % len(first_events)])
            for number, memory in enumerate(made)
        ],
        batch_size=500,
    )
    return user


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--events", type=int, default=400)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--text-bytes", type=int, default=800)
    args = parser.parse_args()
    user = build(
        sessions=args.sessions,
        events=args.events,
        memories=args.memories,
        text_bytes=args.text_bytes,
    )
    started = time.perf_counter()
    size = pieces = 0
    for piece in user_data_export(user=user):
        size += len(piece.encode())
        pieces += 1
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    for _piece in user_data_export(user=user):
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    json.loads("".join(user_data_export(user=user)))
    started = time.perf_counter()
    report = user_data_delete(user=user, delete_account=True)
    deleted_in = time.perf_counter() - started
    events = args.sessions * args.events
    print(f"export: {events:,} events, {args.memories:,} memories")
    print(f"  document {size / 2**20:.1f} MiB in {pieces} pieces, {elapsed:.2f} s")
    print(f"  peak Python heap while streaming {peak / 2**20:.1f} MiB")
    print(f"delete all with the account: {report.sessions} sessions in {deleted_in:.2f} s")


if __name__ == "__main__":
    main()
