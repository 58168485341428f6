"""System checks that refuse settings which cannot work together.

They run with management commands such as ``migrate`` (which ``make run`` and
the compose ``migrate`` service run before the server starts) and when a
Celery worker starts, so a deployment mistake stops with a message instead of
failing later at the first WebSocket push or background job.
"""

from django.conf import settings
from django.core.checks import Error, Tags, register

from core.llm import PROVIDERS

IN_MEMORY_CHANNEL_LAYER = "channels.layers.InMemoryChannelLayer"


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
    if settings.LLM_PROVIDER.lower() not in PROVIDERS:
        errors.append(
            Error(
                f"LLM_PROVIDER must be one of {', '.join(PROVIDERS)}, "
                f"not {settings.LLM_PROVIDER!r}.",
                hint="Use 'openai' for Ollama, vLLM, LM Studio or any OpenAI-compatible server.",
                id="chatapp.E006",
            )
        )
    if settings.MEMORY_EMBEDDER == "openai" and not settings.MEMORY_OPENAI_EMBEDDING_MODEL:
        errors.append(
            Error(
                "MEMORY_EMBEDDER=openai needs the server's embedding model.",
                hint="Set MEMORY_OPENAI_EMBEDDING_MODEL, e.g. nomic-embed-text on Ollama.",
                id="chatapp.E007",
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
