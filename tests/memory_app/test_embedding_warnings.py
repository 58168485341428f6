"""Issue 42, item 5: an embedding that fails or has the wrong shape, on a turn's search or in
a background task, never fails the work (the search goes by words) and is said once on the
staff console's home, until acknowledged or resolved."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client

from memory_app import selectors
from memory_app.embedding import vector_to_bytes
from memory_app.models import EmbeddingWarning, Memory
from tests.factories import StaffFactory
from tests.fake_openai import HttpError
from tests.memory_app.support import memory_make
from tests.memory_app.test_embeddings import (
    NAME,
    embedder,  # noqa: F401 (fixture)
    run,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("embedder")]

BANNER = "Embeddings failed: memory search goes by words alone."


def _embedded(user, *texts: str) -> list[Memory]:
    memories = [memory_make(user=user, text=text) for text in texts]
    assert run(memory_ids=[str(memory.pk) for memory in memories])["memories"] == len(texts)
    return memories


def _home(client: Client) -> str:
    return client.get("/admin/").content.decode()


def test_searches_whose_embeddings_fail_go_by_words_and_the_console_says_so_once(user, fake_openai):
    tea, _lyon = _embedded(user, "The user likes green tea.", "The user lives in Lyon.")
    fake_openai.push_embedding(HttpError(503, "loading model"), HttpError(503, "loading model"))

    for _search in range(2):
        found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="green tea")
        assert found[0].id == str(tea.pk)

    warning = EmbeddingWarning.objects.get()
    assert (warning.kind, warning.embedder, warning.occurrences) == ("failed", NAME, 2)
    assert "loading model" in warning.error
    staff = Client()
    staff.force_login(StaffFactory(is_superuser=True, username="ines"))
    assert _home(staff).count(BANNER) == 1

    acknowledged = staff.post(
        "/admin/memory_app/embeddingwarning/",
        {"action": "acknowledge", "_selected_action": [warning.pk]},
        follow=True,
    )

    assert "1 warning acknowledged" in acknowledged.content.decode()
    assert BANNER not in _home(staff)
    warning.refresh_from_db()
    assert warning.closed_how == "Acknowledged by ines"
    fake_openai.push_embedding(HttpError(503, "loading model"))
    selectors.memory_search(app_name="chat", user_pk=user.pk, query="green tea")
    assert _home(staff).count(BANNER) == 1


def test_a_query_vector_of_another_shape_goes_by_words_and_warns(user, fake_openai):
    """Vectors stored by the same model name with another width (the server's model changed
    under its name): comparing them failed every turn with numpy's "matmul" error."""
    tea, lyon = _embedded(user, "The user likes green tea.", "The user lives in Lyon.")
    Memory.objects.filter(pk__in=[tea.pk, lyon.pk]).update(
        embedding=vector_to_bytes(np.ones(5, dtype=np.float32))
    )

    found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="green tea")

    assert found[0].id == str(tea.pk)
    warning = EmbeddingWarning.objects.get()
    assert warning.kind == "wrong_shape"
    assert "the stored vectors have 5" in warning.error
    staff = Client()
    staff.force_login(StaffFactory(is_superuser=True))
    assert _home(staff).count("Embeddings of the wrong shape: memory search goes by words") == 1


def test_a_background_embedding_that_fails_warns_until_one_succeeds(user, fake_openai):
    memory = memory_make(user=user, text="The user grows tomatoes.")
    fake_openai.push_embedding(HttpError(404, "model 'nomic-embed-text' not found"))

    assert run(memory_ids=[str(memory.pk)]) == "failed"

    warning = EmbeddingWarning.objects.get(closed_at__isnull=True)
    assert "not found" in warning.error

    assert run(memory_ids=[str(memory.pk)]) == {"memories": 1, "turns": 0}

    warning.refresh_from_db()
    assert warning.closed_how == "Embeddings worked again"


def test_staff_without_the_permission_see_no_warning(user, fake_openai):
    _embedded(user, "The user likes green tea.")
    fake_openai.push_embedding(HttpError(503, "loading model"))
    selectors.memory_search(app_name="chat", user_pk=user.pk, query="green tea")
    staff = Client()
    staff.force_login(StaffFactory())

    assert BANNER not in _home(staff)
