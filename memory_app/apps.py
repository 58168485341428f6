from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save, pre_delete


def _session_pre_delete(sender, instance, **kwargs) -> None:
    """Settle a session's memories before its events (and their source links) are deleted."""
    from memory_app.services import session_memories_release

    session_memories_release(session_id=instance.pk)


def _memory_saved(sender, instance, **kwargs) -> None:
    """Any saved memory makes every process rebuild that owner's search index."""
    from memory_app.services import memory_index_invalidate

    memory_index_invalidate(app_name=instance.app_name, user_pk=instance.user_id)


def _memory_deleted(sender, instance, **kwargs) -> None:
    """So does a deleted one, without recreating the settings of a user being deleted."""
    from memory_app.services import memory_index_invalidate

    memory_index_invalidate(
        app_name=instance.app_name, user_pk=instance.user_id, settings_create=False
    )


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Long-term memory"

    def ready(self) -> None:
        """Register the memory provider with the runner and connect the provenance hooks.

        A ``pre_delete`` receiver also makes ``QuerySet.delete()`` (the idle-session cleanup)
        fetch the sessions and call it for each, so every deletion path is covered.
        """
        from memory_app.models import Memory
        from memory_app.provider import DjangoMemoryProvider
        from sessions_app.models import SessionRecord
        from sessions_app.runtime.memory_hooks import memory_provider_register

        memory_provider_register(DjangoMemoryProvider())
        pre_delete.connect(_session_pre_delete, sender=SessionRecord, dispatch_uid="memory-session")
        post_save.connect(_memory_saved, sender=Memory, dispatch_uid="memory-saved")
        post_delete.connect(_memory_deleted, sender=Memory, dispatch_uid="memory-deleted")
