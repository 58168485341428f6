from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions (short-term memory)"

    def ready(self) -> None:
        """Declare the sessions' owners and object permissions to the access layer."""
        from sessions_app.permissions import session_permissions_register

        session_permissions_register()
