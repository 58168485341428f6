"""System checks that refuse settings which cannot work together.

They run with management commands such as ``migrate`` (which ``make run`` and
the compose ``migrate`` service run before the server starts) and when a
Celery worker starts, so a deployment mistake stops with a message instead of
failing later at the first WebSocket push or background job.
"""

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.checks.registry import registry
from django.core.checks.security.base import W001, W002
from django.core.checks.security.csrf import W003
from django.utils.module_loading import import_string

IN_MEMORY_CHANNEL_LAYER = "channels.layers.InMemoryChannelLayer"

# Django's middlewares that its security checks find by dotted name; for the three it warns
# about when missing, its warning (silenced in settings) and the one given here instead.
NAMED_PROTECTIONS: dict[str, tuple[Warning, str] | None] = {
    "django.middleware.security.SecurityMiddleware": (W001, "chatapp.W101"),
    "django.middleware.clickjacking.XFrameOptionsMiddleware": (W002, "chatapp.W102"),
    "django.middleware.csrf.CsrfViewMiddleware": (W003, "chatapp.W103"),
    "django.contrib.sessions.middleware.SessionMiddleware": None,
}


@register(Tags.compatibility, deploy=False)
def check_settings_consistency(app_configs, **kwargs) -> list[Error]:
    errors: list[Error] = []
    channel_backend = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    database_engine = settings.DATABASES["default"]["ENGINE"]

    if settings.BACKGROUND_TASKS not in ("inprocess", "celery"):
        errors.append(
            Error(
                "BACKGROUND_TASKS must be 'inprocess' or 'celery', "
                f"not {settings.BACKGROUND_TASKS!r}.",
                id="chatapp.E001",
            )
        )
    if settings.BACKGROUND_TASKS == "celery" and settings.CELERY_BROKER_URL.startswith("memory://"):
        errors.append(
            Error(
                "BACKGROUND_TASKS=celery needs a broker shared with the workers, "
                "but the broker is in-process (memory://).",
                hint="Set REDIS_URL (or CELERY_BROKER_URL), or use BACKGROUND_TASKS=inprocess.",
                id="chatapp.E002",
            )
        )
    if settings.BACKGROUND_TASKS == "celery" and channel_backend == IN_MEMORY_CHANNEL_LAYER:
        errors.append(
            Error(
                "External Celery workers cannot reach an in-process channel layer: "
                "notices from background jobs would never arrive on open chat pages.",
                hint="Set REDIS_URL so the channel layer is shared, "
                "or use BACKGROUND_TASKS=inprocess.",
                id="chatapp.E003",
            )
        )
    if settings.LOG_FORMAT not in ("json", "text"):
        errors.append(
            Error(
                f"LOG_FORMAT must be 'json' or 'text', not {settings.LOG_FORMAT!r}.",
                id="chatapp.E004",
            )
        )
    proxy_header = settings.SECURE_PROXY_SSL_HEADER
    if proxy_header is not None and (
        len(proxy_header) != 2 or not proxy_header[0].startswith("HTTP_") or not proxy_header[1]
    ):
        errors.append(
            Error(
                f"SECURE_PROXY_SSL_HEADER must name a request header and its HTTPS value, "
                f"not {','.join(proxy_header)!r}.",
                hint="For example SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https.",
                id="chatapp.E005",
            )
        )
    if settings.PRODUCTION:
        if settings.DEBUG:
            errors.append(
                Error(
                    "DEBUG is on with production settings (PRODUCTION=true).",
                    hint="Unset DEBUG or set DEBUG=false.",
                    id="chatapp.E010",
                )
            )
        if settings.SECRET_KEY == settings.INSECURE_DEVELOPMENT_SECRET_KEY:
            errors.append(
                Error(
                    "Production settings with the development SECRET_KEY.",
                    hint="Set SECRET_KEY in the environment.",
                    id="chatapp.E011",
                )
            )
        if channel_backend == IN_MEMORY_CHANNEL_LAYER:
            errors.append(
                Error(
                    "Production settings with an in-process channel layer: several web "
                    "processes could not reach each other's WebSockets.",
                    hint="Set REDIS_URL.",
                    id="chatapp.E012",
                )
            )
        if database_engine == "django.db.backends.sqlite3":
            errors.append(
                Error(
                    "Production settings with SQLite: several processes need a server database.",
                    hint="Set DATABASE_URL to PostgreSQL.",
                    id="chatapp.E013",
                )
            )
    return errors


def _middleware_named_as_django(*, middleware: list[str]) -> list[str]:
    """``middleware`` with every subclass of a middleware in ``NAMED_PROTECTIONS`` named as
    Django names the class it subclasses; every other entry as it is."""
    protections = {path: import_string(path) for path in NAMED_PROTECTIONS}
    named = []
    for path in middleware:
        try:
            middleware_class = import_string(path)
        except ImportError:
            named.append(path)
            continue
        named.append(
            next(
                (
                    django_path
                    for django_path, django_class in protections.items()
                    if isinstance(middleware_class, type)
                    and issubclass(middleware_class, django_class)
                ),
                path,
            )
        )
    return named


def _django_security_messages(app_configs) -> list[CheckMessage]:
    return [
        message
        for check in registry.get_checks(include_deployment_checks=True)
        if Tags.security in check.tags and check.__module__.startswith("django.")
        for message in check(app_configs=app_configs)
    ]


@register(Tags.security, deploy=True)
def check_middleware_protections(app_configs, **kwargs) -> list[CheckMessage]:
    """Django's deploy checks of its security, CSRF, clickjacking and session middlewares,
    for MIDDLEWARE that holds subclasses of them (``chatapp.loop_middleware``).

    Django looks for those middlewares by their dotted names: it warns that they are missing
    (security.W001-W003, silenced in settings) and skips the checks of the settings they
    read. Here a middleware counts when MIDDLEWARE holds Django's class or a subclass
    (chatapp.W101-W103 when neither), and Django's security checks run again as if
    MIDDLEWARE named Django's classes: every message they give then that they do not give as
    MIDDLEWARE stands (HSTS, HTTPS redirect, secure cookies, frame options, ...) is given
    here, with Django's own id.
    """
    from django.test.utils import override_settings

    as_named = _middleware_named_as_django(middleware=list(settings.MIDDLEWARE))
    messages: list[CheckMessage] = []
    for django_path, protection in NAMED_PROTECTIONS.items():
        if protection is None or django_path in as_named:
            continue
        missing, check_id = protection
        messages.append(
            Warning(
                missing.msg,
                hint=f"Add {django_path} or a subclass of it (chatapp.loop_middleware); this "
                f"check stands for {missing.id}, which is silenced.",
                id=check_id,
            )
        )
    as_it_stands = _django_security_messages(app_configs)
    with override_settings(MIDDLEWARE=as_named):
        as_django_names_them = _django_security_messages(app_configs)
    return messages + [message for message in as_django_names_them if message not in as_it_stands]
