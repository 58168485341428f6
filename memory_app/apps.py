import weakref

from django.apps import AppConfig
from django.db.models import QuerySet
from django.db.models.signals import post_delete, post_save, pre_delete

# Deletions of a queryset of sessions whose memories are already settled, by the queryset.
_settled_deletions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _session_pre_delete(sender, instance, origin=None, **kwargs) -> None:
    """Settle a session's memories before its events (and their source links) are deleted.

    Django sends this for every session of a deletion before deleting any. When a queryset of
    sessions is deleted (the idle cleanup's batch, a user's sessions), the first signal settles
    the memories of every session the queryset holds in one batch, and the others find theirs
    done: a batch of 500 idle sessions costs a few queries rather than ten a session. Any other
    deletion (a user's account taking their sessions with it) settles session by session.
    """
    from memory_app.services import session_memories_release
    from sessions_app.models import SessionRecord

    if not isinstance(origin, QuerySet) or origin.model is not SessionRecord:
        session_memories_release(session_ids=[instance.pk])
        return
    settled = _settled_deletions.get(origin)
    if settled is None:
        settled = set(origin.values_list("pk", flat=True))
        session_memories_release(session_ids=sorted(settled))
        _settled_deletions[origin] = settled
    if instance.pk not in settled:
        session_memories_release(session_ids=[instance.pk])


def _artifact_pre_delete(sender, instance, origin=None, **kwargs) -> None:
    """A session's file removed on its own (not with its session, whose deletion settles its
    memories, nor with the account): the memories drawn from it are released."""
    from memory_app.services import artifact_memories_release
    from sessions_app.models import ArtifactRecord

    model = origin.model if isinstance(origin, QuerySet) else type(origin)
    if model is ArtifactRecord and instance.session_id is not None:
        artifact_memories_release(artifact_ids=[instance.pk])


def _session_rewound(
    sender, session_id: str, restored_from_sequence: int | None = None, **kwargs
) -> None:
    """Revise, once the rewind has committed and in the background, the memories of the turns
    a rewind took out of the history: nothing on the turn's path waits for it. That the
    revision is due is written in the rewind's transaction, so a lost task is not lost work.
    Turns the rewind brought back are to be remembered again."""
    from memory_app.services import session_rewound_release_request

    session_rewound_release_request(
        session_id=session_id, restored_from_sequence=restored_from_sequence
    )


def _memory_saved(sender, instance, **kwargs) -> None:
    """Any saved memory makes every process rebuild that owner's search index, and one without
    a vector of the current embedder is embedded in the background after commit; a profile
    memory also rewrites the ``user:`` key it is the source of."""
    from memory_app.services import (
        embedder_active,
        memory_embeddings_request,
        memory_index_invalidate,
        profile_state_sync,
    )

    memory_index_invalidate(app_name=instance.app_name, user_pk=instance.user_id)
    embedder = embedder_active()
    if (
        embedder is not None
        and "embedding" not in instance.get_deferred_fields()
        and (instance.embedding is None or instance.embedding_model != embedder.name)
    ):
        memory_embeddings_request(memory_ids=[instance.pk])
    if instance.user_id is not None and isinstance(instance.structured, dict):
        profile_state_sync(
            app_name=instance.app_name, user_pk=instance.user_id, fields=instance.structured
        )


def _memory_deleted(sender, instance, **kwargs) -> None:
    """So does a deleted one, without recreating the settings (or profile keys) of a user
    being deleted; and the file it kept goes unless another memory keeps it."""
    from memory_app.services import (
        memory_image_release,
        memory_index_invalidate,
        profile_state_sync,
    )

    memory_index_invalidate(
        app_name=instance.app_name, user_pk=instance.user_id, settings_create=False
    )
    if instance.user_id is not None and isinstance(instance.structured, dict):
        profile_state_sync(
            app_name=instance.app_name,
            user_pk=instance.user_id,
            fields=instance.structured,
            create=False,
        )
    if instance.image_id is not None:
        memory_image_release(artifact_id=instance.image_id)


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Long-term memory"

    def ready(self) -> None:
        """Declare the memories' owners and object permissions, tell appends how to read the
        user's consent to memory creation, and connect the provenance hooks.

        A ``pre_delete`` receiver also makes ``QuerySet.delete()`` (the idle-session cleanup)
        fetch the sessions and call it for each, so every deletion path is covered.
        """
        from memory_app.models import Memory
        from memory_app.permissions import memory_permissions_register
        from memory_app.selectors.generation import memory_consent_condition
        from sessions_app.consent import memory_consent_register
        from sessions_app.models import ArtifactRecord, SessionRecord
        from sessions_app.signals import session_rewound

        memory_permissions_register()
        memory_consent_register(memory_consent_condition())
        pre_delete.connect(_session_pre_delete, sender=SessionRecord, dispatch_uid="memory-session")
        pre_delete.connect(
            _artifact_pre_delete, sender=ArtifactRecord, dispatch_uid="memory-artifact"
        )
        session_rewound.connect(_session_rewound, dispatch_uid="memory-session-rewound")
        post_save.connect(_memory_saved, sender=Memory, dispatch_uid="memory-saved")
        post_delete.connect(_memory_deleted, sender=Memory, dispatch_uid="memory-deleted")
