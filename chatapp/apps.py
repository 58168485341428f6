from django.apps import AppConfig


class ChatappConfig(AppConfig):
    name = "chatapp"
    verbose_name = "Chat app"

    def ready(self) -> None:
        from django.apps import apps
        from django.core.signals import request_finished
        from django.db.models.signals import post_migrate
        from django.urls import register_converter

        from chatapp import checks  # noqa: F401  (registers the system checks)
        from chatapp.periodic import periodic_tasks_install_after_migrate
        from core.converters import IdConverter, KeyConverter
        from core.log_context import log_context_clear_on_request_finished

        # Before any URL conf is read: every id of every route, HTTP and WebSocket, is <id:...>,
        # an id a service-API client chose <key:...>.
        register_converter(IdConverter, "id")
        register_converter(KeyConverter, "key")

        post_migrate.connect(
            periodic_tasks_install_after_migrate,
            sender=apps.get_app_config("django_celery_beat"),
            dispatch_uid="chatapp-periodic-tasks",
        )
        request_finished.connect(log_context_clear_on_request_finished)
