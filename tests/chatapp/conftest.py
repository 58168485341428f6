import uuid

import pytest


@pytest.fixture
def chat_settings(settings):
    """Fast offline streaming, and rate-limit counters of this test only."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.001
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }
