from django.apps import AppConfig


class ChatappConfig(AppConfig):
    name = "chatapp"
    verbose_name = "Chat app"

    def ready(self) -> None:
        from chatapp import checks  # noqa: F401  (registers the system checks)
