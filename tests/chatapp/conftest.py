import uuid

import pytest
from django.contrib.auth.tokens import default_token_generator
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from access_app.services import access_token_create
from sessions_app import services
from tests.factories import AccessGrantFactory, MemoryFactory, UserFactory


@pytest.fixture
def chat_settings(settings):
    """Fast offline streaming, and rate-limit counters of this test only."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.001
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }


@pytest.fixture
def staff_user_with_data():
    """A superuser (every admin page renders for them) with a chat, a memory, a grant and a
    personal access token."""
    user = UserFactory(is_staff=True, is_superuser=True)
    session = services.session_create(app_name="chat", user_id=str(user.pk), session_id="walk-1")
    memory = MemoryFactory(user=user, text="Prefers green tea.")
    grant = AccessGrantFactory(owner=user)
    token = access_token_create(user=user, name="assistant", scopes=["read"])
    return user, {
        "session_id": session.id,
        "memory_id": str(memory.pk),
        "grant_id": str(grant.pk),
        "token_id": str(token.record.pk),
        "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
        "token": default_token_generator.make_token(user),
    }
