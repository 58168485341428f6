"""Files memories keep: a kept file lives while a memory holds it."""

from __future__ import annotations

import uuid

from django.db.models import Exists, OuterRef

from memory_app.models import Memory
from sessions_app.models import ArtifactRecord


def memory_image_release(*, artifact_id: uuid.UUID | str) -> int:
    """Delete the kept file ``artifact_id`` unless a memory still holds it; its stored bytes
    go once the deletion commits (``sessions_app.artifact_files``). Called for each deleted
    memory that held a file, whatever deleted it (the user, chat deletion through provenance,
    forgetting, deleting all one's data). Returns how many versions went (0 or 1)."""
    held = Memory.objects.filter(image_id=OuterRef("pk"))
    deleted, _ = ArtifactRecord.objects.filter(~Exists(held), pk=artifact_id).delete()
    return deleted
