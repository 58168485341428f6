"""Who owns each memory model, the object permissions over them, and how the audit log names a
memory to its user (registered with the access layer when the app starts)."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.utils.text import Truncator

from access_app.models import AccessScope
from access_app.permissions import (
    object_rules_register,
    owner_or_staff_read,
    owner_or_staff_write,
    owner_resolver_register,
    staff_with_permission,
)
from access_app.selectors import AuditSubject, audit_subject_describer_register
from memory_app.models import GenerationJob, Memory, MemoryRevision, MemorySettings, MemorySource


def memories_describe(user: AbstractBaseUser, memory_ids: set[str]) -> dict[str, AuditSubject]:
    """The user's own memories among ``memory_ids``, named by their current text."""
    ids = set()
    for memory_id in memory_ids:
        try:
            ids.add(uuid.UUID(memory_id))
        except ValueError:
            continue
    return {
        str(pk): AuditSubject(f"the memory “{Truncator(text).chars(80)}”")
        for pk, text in Memory.objects.filter(user_id=user.pk, pk__in=ids).values_list("pk", "text")
    }


def memory_permissions_register() -> None:
    for model in (Memory, GenerationJob, MemorySettings):
        owner_resolver_register(model, lambda obj: obj.user_id)
    for model in (MemorySource, MemoryRevision):
        owner_resolver_register(model, lambda obj: obj.memory.user_id)
    object_rules_register(
        {
            **{
                f"memory_app.view_{name}": owner_or_staff_read(
                    f"memory_app.view_{name}", scope=AccessScope.MEMORIES
                )
                for name in ("memory", "memorysource", "memoryrevision", "generationjob")
            },
            "memory_app.change_memory": owner_or_staff_write("memory_app.change_memory"),
            "memory_app.delete_memory": owner_or_staff_write("memory_app.delete_memory"),
            "memory_app.review_quarantine": staff_with_permission("memory_app.review_quarantine"),
        }
    )
    audit_subject_describer_register(Memory, memories_describe)
