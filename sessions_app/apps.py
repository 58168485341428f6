from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions (short-term memory)"

    def ready(self) -> None:
        """Declare the sessions' owners and object permissions to the access layer, have an
        artifact's file and an event's large part removed with its row, and register the
        events' OpenAPI schema."""
        from django.db.models.signals import post_delete

        import sessions_app.openapi  # noqa: F401 (registers drf-spectacular's extensions)
        from sessions_app.artifact_files import artifact_file_delete_on_commit
        from sessions_app.models import ArtifactRecord, EventBlob
        from sessions_app.permissions import session_permissions_register

        session_permissions_register()
        post_delete.connect(
            artifact_file_delete_on_commit,
            sender=ArtifactRecord,
            dispatch_uid="sessions_app.artifact_file_delete",
        )
        post_delete.connect(
            artifact_file_delete_on_commit,
            sender=EventBlob,
            dispatch_uid="sessions_app.event_blob_file_delete",
        )
