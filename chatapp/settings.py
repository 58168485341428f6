"""Settings, all read from the environment (django-environ).

Two shapes are supported and checked for consistency by ``chatapp.checks``:

* embedded (the default): SQLite file, in-process channel layer, local-memory
  cache, background work on an in-process thread pool;
* distributed: ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` (channel layer,
  cache, Celery broker), any number of web and worker processes.
"""

from datetime import timedelta
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

INSECURE_DEVELOPMENT_SECRET_KEY = "insecure-development-key-set-SECRET_KEY-in-production"

PRODUCTION = env.bool("PRODUCTION", default=False)
# Off unless asked for (`make run DEBUG=true`): the default serves the product, with its own error
# pages, never Django's technical ones listing the URL patterns.
DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default=INSECURE_DEVELOPMENT_SECRET_KEY)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# --- HTTPS (on by default with PRODUCTION; each can be turned off on its own) ----
# Behind a proxy that ends TLS, name the header it sets, e.g. "HTTP_X_FORWARDED_PROTO,https";
# only set it when the proxy overwrites that header on every request.
_proxy_ssl_header = env.str("SECURE_PROXY_SSL_HEADER", default="")
SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header.split(",", 1)) if _proxy_ssl_header else None
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=PRODUCTION)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=PRODUCTION)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=PRODUCTION)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=PRODUCTION)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=PRODUCTION)
# Content-Security-Policy on every response (django-csp): scripts, connections (the chat
# WebSocket included), images and frames from this site only, so text that got past the
# Markdown sanitiser still could not run or send data elsewhere. Styles also allow inline
# ones: the staff console's and the API docs' templates (Django's, drf-spectacular's) have
# them, and a style cannot run code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_celery_beat",
    "rest_framework_api_key",
    "chatapp",
    "agents_app",
    "sessions_app",
    "memory_app",
    "access_app",
]

MIDDLEWARE = [
    # Probes (/healthz, /readyz, /metrics) are answered before the host check and the
    # HTTPS redirect: orchestrators call them over plain HTTP by address.
    "chatapp.middleware.RequestIdMiddleware",
    "chatapp.middleware.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "chatapp.middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "chatapp.middleware.LogUserMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "chatapp.middleware.TimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # After the session and the user are in place, so that its 404 is the site's page.
    "chatapp.middleware.UnstorableTextMiddleware",
    # Innermost, so it sees the view's exception first: a database outage becomes a 503.
    "chatapp.middleware.DatabaseUnavailableMiddleware",
    # Last, as django-axes asks: turns a sign-in refused for a lockout into its page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "chatapp.urls"
ASGI_APPLICATION = "chatapp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # {% load sizes %}: a file's size as a person reads it (core.sizes), in any app's
            # templates.
            "libraries": {"sizes": "core.template_sizes"},
        },
    },
]

# --- Database -----------------------------------------------------------------
SQLITE_PATH = BASE_DIR / "build" / "db.sqlite3"
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{SQLITE_PATH}"),
}
# Under ASGI every HTTP request runs its ORM work on a thread of its own, and Django keeps a
# persistent connection per thread: CONN_MAX_AGE above 0 left one daphne process holding one
# connection per recent request thread (77 after 200 requests). So connections are never kept
# by a thread: on PostgreSQL they come from a pool of each process (psycopg_pool; a request
# takes one when it first queries and gives it back when it ends), which bounds a process to
# DATABASE_POOL_MAX_SIZE and saves the connection setup per request that CONN_MAX_AGE=0 pays
# (docs/deploy.md, "PostgreSQL", has the figures); DATABASE_POOL_MAX_SIZE=0 opens and closes
# one per request instead.
DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASE_POOL_MAX_SIZE = env.int("DATABASE_POOL_MAX_SIZE", default=8)
DATABASE_POOL_TIMEOUT_SECONDS = env.float("DATABASE_POOL_TIMEOUT_SECONDS", default=3.0)
USING_SQLITE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, which checks connections before reuse its own way (see there).
    DATABASES["default"]["ENGINE"] = "core.postgresql"
if DATABASES["default"]["ENGINE"] == "core.postgresql" and DATABASE_POOL_MAX_SIZE:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
    DATABASE_POOL = DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        # Opened as requests need them, up to the maximum, and closed after a minute unused.
        # (With a connection kept at all times, the first request, finding it still being
        # opened, would have the pool open a second: two for a one-thread process like beat.)
        "min_size": 0,
        "max_size": DATABASE_POOL_MAX_SIZE,
        "max_idle": 60.0,
        # A request waits this long for a connection (the pool full, or the database down),
        # then answers 503; less than daphne's 5 s for a WebSocket handshake, so that a socket
        # opened while the database is down is told so before daphne drops it.
        "timeout": DATABASE_POOL_TIMEOUT_SECONDS,
        # A failed connection attempt is retried for this long only, so that once the database
        # is back the next request connects at once rather than after a long backoff.
        "reconnect_timeout": 2.0,
    }
if USING_SQLITE:
    # IMMEDIATE takes the write lock at BEGIN, so concurrent writers queue on
    # the busy timeout instead of failing on a lock upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # The test database is a file beside the real one, not the in-memory default: an in-memory
    # database shares its cache between connections, where a second writer fails at once
    # ("database table is locked") instead of waiting on the busy timeout as it does here.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "build" / "test-db.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: channel layer, cache, broker ----------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
# Prefix of this deployment's keys in Redis (cache, worker heartbeats).
CACHE_KEY_PREFIX = env.str("CACHE_KEY_PREFIX", default="chatapp")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # channels-redis waits for messages with a 5 s blocking pop; redis-py 8
                # also times reads out after 5 s by default, and the two race under load,
                # killing the consumer. A longer read timeout lets the pop answer first.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "capacity": 1500,
                "expiry": 30,
            },
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": CACHE_KEY_PREFIX,
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# "inprocess": tasks run on a thread pool of the web process after commit (no
# broker needed); "celery": tasks go to the Celery broker for external workers.
BACKGROUND_TASKS = env.str("BACKGROUND_TASKS", default="celery" if REDIS_URL else "inprocess")
# With "inprocess", the web process also runs the periodic tasks (beat's job otherwise); the
# test suite turns this off so that no cleanup runs against a test's database behind its back.
PERIODIC_IN_PROCESS = True
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "memory://")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Schedules are rows of django-celery-beat, editable in the staff console; the
# CELERY_BEAT_SCHEDULE entries below are the defaults that fill in missing rows.
CELERY_BEAT_SCHEDULER = "chatapp.periodic:EditableDatabaseScheduler"
# Workers log through LOGGING below (JSON lines in production) instead of Celery's own setup.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Each worker writes a heartbeat to Redis this often; /readyz wants one seen in 3 intervals.
WORKER_HEARTBEAT_INTERVAL_SECONDS = env.float("WORKER_HEARTBEAT_INTERVAL_SECONDS", default=10.0)
# A task is acknowledged only when it ends (acks_late), so a worker killed mid-task leaves it
# unacknowledged in Redis; the broker hands it out again after this many seconds. It must be
# longer than any task runs and than any retry countdown a task waits itself (longer waits are
# left to the periodic redispatch), or a task still running or waiting would be sent twice
# (harmless, as tasks are idempotent, but wasted). Kombu's default, an hour, would leave a
# killed worker's job waiting that long.
TASK_VISIBILITY_TIMEOUT_SECONDS = env.int("TASK_VISIBILITY_TIMEOUT_SECONDS", default=900)
TASK_RESTORE_INTERVAL_SECONDS = max(1.0, TASK_VISIBILITY_TIMEOUT_SECONDS / 10)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": TASK_VISIBILITY_TIMEOUT_SECONDS,
    # Workers look for such tasks a tenth of the timeout apart (kombu: every 100 s).
    "unacked_restore_interval": TASK_RESTORE_INTERVAL_SECONDS,
    "unacked_restore_throttle": 1,
    # One worker looks at a time, under a lock in Redis; a worker killed while looking (a sweep
    # of milliseconds) would hold it until it expires (kombu: 300 s), and every other worker
    # would hand out nothing meanwhile. Restoring a task is a transaction of its own, so two
    # sweeps overlapping once the lock expires cannot send a task twice.
    "unacked_mutex_expire": TASK_RESTORE_INTERVAL_SECONDS,
}

# --- Sessions store ---------------------------------------------------------------
DEFAULT_APP_NAME = env.str("DEFAULT_APP_NAME", default="chat")
# Sessions idle longer than this are deleted by the periodic cleanup; 0 keeps them forever.
SESSION_IDLE_TTL_SECONDS = env.int("SESSION_IDLE_TTL_SECONDS", default=30 * 24 * 3600)
# Temporary chats are deleted this many days after they were started (0 keeps them until idle).
TEMPORARY_CHAT_RETENTION_DAYS = env.int("TEMPORARY_CHAT_RETENTION_DAYS", default=30)
SESSION_CLEANUP_INTERVAL_SECONDS = env.int("SESSION_CLEANUP_INTERVAL_SECONDS", default=3600)
SESSION_CLEANUP_BATCH_SIZE = env.int("SESSION_CLEANUP_BATCH_SIZE", default=500)
# The largest event stored, in bytes: its JSON with each file's bytes counted as bytes (not
# base64). ADK stores events of any size; an agent's photo, PDF or tool result must fit.
MAX_EVENT_BYTES = env.int("MAX_EVENT_BYTES", default=32 * 1024 * 1024)
# A file (inline data) or a tool's result (function_response) larger than this is kept in the
# artifacts storage beside the event, which names it; the event's row stays small, and every
# read gives the part back whole.
EVENT_PART_INLINE_MAX_BYTES = env.int("EVENT_PART_INLINE_MAX_BYTES", default=64 * 1024)
# The longest body of an event append (REST and /api/v1): the largest event with its files
# in base64, and room for the rest.
EVENT_REQUEST_MAX_BYTES = MAX_EVENT_BYTES * 4 // 3 + 2**20
MAX_STATE_VALUE_BYTES = env.int("MAX_STATE_VALUE_BYTES", default=64 * 1024)
MAX_STATE_KEY_LENGTH = 255

CELERY_BEAT_SCHEDULE = {
    "sessions-expire-idle": {
        "task": "sessions_app.tasks.sessions_expire_idle",
        "schedule": float(SESSION_CLEANUP_INTERVAL_SECONDS),
    },
    "sessions-temporary-expire": {
        "task": "sessions_app.tasks.sessions_temporary_expire",
        "schedule": float(SESSION_CLEANUP_INTERVAL_SECONDS),
    },
    # Files whose rows rolled back (a failed write after the file was stored), a day after.
    "artifact-files-orphaned": {
        "task": "sessions_app.tasks.artifact_files_orphaned_delete",
        "schedule": 3 * 3600.0,
    },
}

# --- Models and agents ----------------------------------------------------------------
# Which provider answers: "gemini", "openai" (any OpenAI-compatible server: Ollama, vLLM,
# LM Studio, ...) or "offline". An app may name its own in the staff console. A provider
# without its access configured leaves the built-in offline model (no network) answering.
LLM_PROVIDER = env.str("LLM_PROVIDER", default="gemini")
GEMINI_API_KEY = env.str("GEMINI_API_KEY", default=env.str("GOOGLE_API_KEY", default=""))
GOOGLE_GENAI_USE_VERTEXAI = env.bool("GOOGLE_GENAI_USE_VERTEXAI", default=False)
GOOGLE_CLOUD_PROJECT = env.str("GOOGLE_CLOUD_PROJECT", default="")
GOOGLE_CLOUD_LOCATION = env.str("GOOGLE_CLOUD_LOCATION", default="us-central1")
GEMINI_BASE_URL = env.str("GEMINI_BASE_URL", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
LLM_MODEL = env.str("LLM_MODEL", default="gemini-2.5-flash")
LLM_TIMEOUT_SECONDS = env.float("LLM_TIMEOUT_SECONDS", default=60.0)
LLM_RETRY_ATTEMPTS = env.int("LLM_RETRY_ATTEMPTS", default=4)
LLM_RETRY_BASE_DELAY_SECONDS = env.float("LLM_RETRY_BASE_DELAY_SECONDS", default=0.5)
# Most tokens a model may write for one answer: a chat reply, a compaction summary, a
# structured answer of memory generation (sent as max_tokens, so no request runs unbounded).
LLM_MAX_REPLY_TOKENS = env.int("LLM_MAX_REPLY_TOKENS", default=1024)
LLM_MAX_SUMMARY_TOKENS = env.int("LLM_MAX_SUMMARY_TOKENS", default=512)
LLM_MAX_STRUCTURED_TOKENS = env.int("LLM_MAX_STRUCTURED_TOKENS", default=1024)
# The context window of the OpenAI-compatible server's model, in tokens, where the server does
# not say it (vLLM and LM Studio do; llama.cpp's and Ollama's OpenAI API do not). Prompts are
# trimmed to fit it, the oldest history first.
OPENAI_CONTEXT_TOKENS = env.int("OPENAI_CONTEXT_TOKENS", default=8192)
# Requests one model server serves at once (chat first, background work waiting); 0: no limit,
# as clouds need none. Local servers that serve one at a time (llama.cpp's, by default) want 1.
OPENAI_MAX_CONCURRENT_REQUESTS = env.int("OPENAI_MAX_CONCURRENT_REQUESTS", default=0)
OFFLINE_MODEL_CHUNK_DELAY_SECONDS = env.float("OFFLINE_MODEL_CHUNK_DELAY_SECONDS", default=0.02)
# Per-app agent definitions: {"app_name": {field of AgentConfig: value}}.
AGENTS: dict = {}

# --- Chat WebSocket ---------------------------------------------------------------
# Longest user message a turn accepts, in characters.
CHAT_MAX_MESSAGE_CHARS = env.int("CHAT_MAX_MESSAGE_CHARS", default=8000)
# Attachments of a chat message: the largest file, and how many go with one message.
ATTACHMENT_MAX_BYTES = env.int("ATTACHMENT_MAX_BYTES", default=10 * 1024 * 1024)
# The web server (chatapp.webserver) answers a longer request body 413 before reading it: the
# larger of an event append's body (EVENT_REQUEST_MAX_BYTES) and an attachment's upload with
# room for its form. Each route then holds to its own limit (DATA_UPLOAD_MAX_MEMORY_SIZE for
# the other JSON bodies).
REQUEST_BODY_MAX_BYTES = env.int(
    "REQUEST_BODY_MAX_BYTES", default=max(EVENT_REQUEST_MAX_BYTES, ATTACHMENT_MAX_BYTES + 2**20)
)
ATTACHMENT_MAX_COUNT = env.int("ATTACHMENT_MAX_COUNT", default=5)
# Attachments up to this size go to Gemini inline in the request; larger ones through its Files
# API (a request holds about 20 MB inline in all).
ATTACHMENT_INLINE_MAX_BYTES = env.int("ATTACHMENT_INLINE_MAX_BYTES", default=4 * 1024 * 1024)
# Turns a user may start per minute over all their sockets; 0 turns the limit off.
CHAT_TURNS_PER_MINUTE = env.int("CHAT_TURNS_PER_MINUTE", default=20)
# MCP requests (/mcp/) a personal access token or a service account's key may make per minute;
# 0 turns the limit off.
MCP_REQUESTS_PER_MINUTE = env.int("MCP_REQUESTS_PER_MINUTE", default=120)
# A chat socket closes as its sign-in ends (pushed through the channel layer); each frame also
# checks the sign-in, at most once this often (agents_app.chat.sockets).
CHAT_SIGNIN_RECHECK_SECONDS = env.float("CHAT_SIGNIN_RECHECK_SECONDS", default=1.0)

# --- Turns that outlive their process (agents_app.chat.turn_claims) -----------------------------
# A running turn renews its claim a third of this apart; a claim not renewed for this long
# belongs to a process that died, and a re-sent message or a Retry runs the turn elsewhere.
TURN_LEASE_SECONDS = env.float("TURN_LEASE_SECONDS", default=15.0)
# A turn whose claim has not been renewed for this long and that has no final event is
# stored as interrupted by the sweeper (error code "server_stopped"): one model call's
# timeout plus a margin, time enough for a client that reconnects to resume it instead.
TURN_INTERRUPTED_AFTER_SECONDS = env.float(
    "TURN_INTERRUPTED_AFTER_SECONDS", default=LLM_TIMEOUT_SECONDS + 30.0
)
TURN_SWEEP_INTERVAL_SECONDS = env.float("TURN_SWEEP_INTERVAL_SECONDS", default=15.0)
# On SIGTERM a web process refuses new turns and lets running ones finish for this long, then
# stores the rest as interrupted; docker-compose.yml's stop_grace_period leaves it 5 s more.
TURN_SHUTDOWN_GRACE_SECONDS = env.float("TURN_SHUTDOWN_GRACE_SECONDS", default=25.0)
CELERY_BEAT_SCHEDULE |= {
    "turns-sweep": {
        "task": "agents_app.tasks.turns_sweep",
        "schedule": TURN_SWEEP_INTERVAL_SECONDS,
    },
}

# --- Long-term memory -------------------------------------------------------------------
# "auto": local MiniLM if installed, else the provider's embeddings if it is configured (and,
# for "openai", an embedding model is named), else none.
MEMORY_EMBEDDER = env.str("MEMORY_EMBEDDER", default="auto")
MEMORY_GEMINI_EMBEDDING_MODEL = env.str(
    "MEMORY_GEMINI_EMBEDDING_MODEL", default="gemini-embedding-001"
)
MEMORY_OPENAI_EMBEDDING_MODEL = env.str("MEMORY_OPENAI_EMBEDDING_MODEL", default="")
# A server of its own for the embeddings (llama.cpp serves one model a server); empty: the
# chat's OPENAI_BASE_URL and OPENAI_API_KEY.
MEMORY_OPENAI_EMBEDDING_BASE_URL = env.str("MEMORY_OPENAI_EMBEDDING_BASE_URL", default="")
MEMORY_OPENAI_EMBEDDING_API_KEY = env.str("MEMORY_OPENAI_EMBEDDING_API_KEY", default="")
# Model (of LLM_PROVIDER) that extracts facts from conversations and consolidates them.
MEMORY_EXTRACTION_MODEL = env.str("MEMORY_EXTRACTION_MODEL", default=LLM_MODEL)
# Apps whose memories have PII (emails, phone numbers) redacted: {"app": true}.
MEMORY_PII_REDACTION = env.json("MEMORY_PII_REDACTION", default={})
# When conversations become memories: these defaults, and per app
# MEMORY_TRIGGERS = {"app": {"every_n_turns": 5, "every_turn": False,
# "session_idle_seconds": 1800, "session_left_seconds": 120, "explicit": True}} (a JSON
# object in the environment).
MEMORY_TRIGGER_EVERY_N_TURNS = env.int("MEMORY_TRIGGER_EVERY_N_TURNS", default=5)
MEMORY_TRIGGER_EVERY_TURN = env.bool("MEMORY_TRIGGER_EVERY_TURN", default=False)
MEMORY_TRIGGER_SESSION_IDLE_SECONDS = env.int("MEMORY_TRIGGER_SESSION_IDLE_SECONDS", default=1800)
MEMORY_TRIGGER_EXPLICIT = env.bool("MEMORY_TRIGGER_EXPLICIT", default=True)
# A session the user left (its last chat socket closed, or another chat opened) is generated
# after this quiet period unless they came back (a page reload comes back at once); 0: off.
MEMORY_TRIGGER_SESSION_LEFT_SECONDS = env.int("MEMORY_TRIGGER_SESSION_LEFT_SECONDS", default=120)
# How often sessions left longer than their quiet period are looked for.
MEMORY_SESSION_LEFT_SCAN_SECONDS = env.float("MEMORY_SESSION_LEFT_SCAN_SECONDS", default=15.0)
MEMORY_TRIGGERS = env.json("MEMORY_TRIGGERS", default={})
# Memories are forgotten this many days after they are made (0: kept until deleted), unless
# their topic (MemoryTopic.ttl_days) or the fact itself ("this week") says otherwise; per app
# as MEMORY_APP_TTL_DAYS = {"app": days} (a JSON object in the environment).
MEMORY_DEFAULT_TTL_DAYS = env.int("MEMORY_DEFAULT_TTL_DAYS", default=0)
MEMORY_APP_TTL_DAYS = env.json("MEMORY_APP_TTL_DAYS", default={})
# Generation jobs: events per job, retries of transient model errors, lost enqueues and workers.
MEMORY_JOB_MAX_EVENTS = env.int("MEMORY_JOB_MAX_EVENTS", default=200)
# A job failing transiently is retried with backoff growing to an hour, and dead only after a
# day of trying, so that a model server's outage loses nothing.
MEMORY_JOB_RETRY_FOR_SECONDS = env.int("MEMORY_JOB_RETRY_FOR_SECONDS", default=24 * 3600)
MEMORY_JOB_RETRY_BASE_SECONDS = env.float("MEMORY_JOB_RETRY_BASE_SECONDS", default=2.0)
MEMORY_JOB_RETRY_MAX_SECONDS = env.float("MEMORY_JOB_RETRY_MAX_SECONDS", default=3600.0)
MEMORY_JOB_REDISPATCH_AFTER_SECONDS = env.int("MEMORY_JOB_REDISPATCH_AFTER_SECONDS", default=600)
MEMORY_JOB_STUCK_AFTER_SECONDS = env.int("MEMORY_JOB_STUCK_AFTER_SECONDS", default=900)
# A running job renews its heartbeat this often; one silent for 3 beats is a lost worker's,
# and the redispatch (every MEMORY_JOB_REDISPATCH_INTERVAL_SECONDS) sends it again.
MEMORY_JOB_HEARTBEAT_SECONDS = env.float("MEMORY_JOB_HEARTBEAT_SECONDS", default=10.0)
MEMORY_JOB_REDISPATCH_INTERVAL_SECONDS = env.float(
    "MEMORY_JOB_REDISPATCH_INTERVAL_SECONDS", default=20.0
)
MEMORY_IDLE_SCAN_BATCH_SIZE = env.int("MEMORY_IDLE_SCAN_BATCH_SIZE", default=500)
MEMORY_MAINTENANCE_INTERVAL_SECONDS = env.int("MEMORY_MAINTENANCE_INTERVAL_SECONDS", default=300)
# Forgetting: confidence decay of unused memories, pruning of stale weak ones.
MEMORY_FORGET_INTERVAL_SECONDS = env.int("MEMORY_FORGET_INTERVAL_SECONDS", default=24 * 3600)
MEMORY_DECAY_AFTER_DAYS = env.int("MEMORY_DECAY_AFTER_DAYS", default=30)
MEMORY_DECAY_FACTOR = env.float("MEMORY_DECAY_FACTOR", default=0.97)
MEMORY_PRUNE_AFTER_DAYS = env.int("MEMORY_PRUNE_AFTER_DAYS", default=90)
MEMORY_PRUNE_BELOW_CONFIDENCE = env.float("MEMORY_PRUNE_BELOW_CONFIDENCE", default=0.2)
# Retrieval: weight of the recency and importance priors, recency half-life, indexes kept.
MEMORY_PRIOR_WEIGHT = env.float("MEMORY_PRIOR_WEIGHT", default=0.1)
MEMORY_RECENCY_HALF_LIFE_DAYS = env.float("MEMORY_RECENCY_HALF_LIFE_DAYS", default=30.0)
# Bytes of memory indexes (texts, postings, vectors) a process keeps at most, whoever they
# are of: a process's memory does not grow with the people it serves.
# Embeddings are made once, in the background: this many texts per embedder call, and every
# MEMORY_EMBEDDING_SWEEP_SECONDS what has no vector yet (turns stored through ADK's API, a lost
# task) is embedded by the sweep.
MEMORY_EMBEDDING_BATCH_SIZE = env.int("MEMORY_EMBEDDING_BATCH_SIZE", default=64)
MEMORY_TASK_MAX_RETRIES = env.int("MEMORY_TASK_MAX_RETRIES", default=5)
MEMORY_EMBEDDING_SWEEP_SECONDS = env.float("MEMORY_EMBEDDING_SWEEP_SECONDS", default=300.0)
CELERY_BEAT_SCHEDULE |= {
    "memory-sessions-idle": {
        "task": "memory_app.tasks.memory_sessions_idle_enqueue",
        "schedule": float(MEMORY_MAINTENANCE_INTERVAL_SECONDS),
    },
    "memory-sessions-left": {
        "task": "memory_app.tasks.memory_sessions_left_enqueue",
        "schedule": MEMORY_SESSION_LEFT_SCAN_SECONDS,
    },
    "memory-jobs-redispatch": {
        "task": "memory_app.tasks.memory_jobs_redispatch",
        "schedule": MEMORY_JOB_REDISPATCH_INTERVAL_SECONDS,
    },
    "memory-rewind-releases-sweep": {
        "task": "memory_app.tasks.rewind_releases_sweep",
        "schedule": float(MEMORY_MAINTENANCE_INTERVAL_SECONDS),
    },
    "memory-rederivations-sweep": {
        "task": "memory_app.tasks.memory_rederivations_sweep",
        "schedule": float(MEMORY_MAINTENANCE_INTERVAL_SECONDS),
    },
    "memories-forget": {
        "task": "memory_app.tasks.memories_forget",
        "schedule": float(MEMORY_FORGET_INTERVAL_SECONDS),
    },
    "memory-embeddings-sweep": {
        "task": "memory_app.tasks.embeddings_sweep",
        "schedule": MEMORY_EMBEDDING_SWEEP_SECONDS,
    },
}

# --- REST API -------------------------------------------------------------------
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=1024 * 1024)
# HTTP Basic on the REST API (the account's password on every request): on for development
# and scripts, off by default in production, where it would put every password one request
# away from a guesser and cost a password hash per request; apps use API keys instead.
API_BASIC_AUTH = env.bool("API_BASIC_AUTH", default=not PRODUCTION)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First, so that a Basic client's failure answers 401 with its challenge.
        *(["access_app.authentication.GuardedBasicAuthentication"] if API_BASIC_AUTH else []),
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 20,
    "DEFAULT_THROTTLE_CLASSES": [
        "core.throttling.APIUserRateThrottle",
        "core.throttling.APIAnonRateThrottle",
    ],
}
# Requests a signed-in user (or an anonymous address) may make to the REST API, as DRF
# rates ("600/minute"); counted in the cache, so shared by all processes with Redis. Empty: off.
API_THROTTLE_USER_RATE = env.str("API_THROTTLE_USER_RATE", default="600/minute")
API_THROTTLE_ANON_RATE = env.str("API_THROTTLE_ANON_RATE", default="60/minute")
API_THROTTLE_SERVICE_ACCOUNT_RATE = env.str(
    "API_THROTTLE_SERVICE_ACCOUNT_RATE", default="12000/minute"
)
# Seconds a process keeps an API key it verified (and an end user it looked up), so that the
# service-account API's hot calls skip those statements; a key revoked in another process is
# refused within this time (agents_app.key_cache). 0: verify on every request.
SERVICE_KEY_CACHE_SECONDS = env.float("SERVICE_KEY_CACHE_SECONDS", default=5.0)
# Seconds a web process may hold the service API's audit rows before it writes them, together,
# on PostgreSQL (core.write_behind); a process killed outright loses that much. 0: each row at
# once, before its response.
WRITE_BEHIND_SECONDS = env.float("WRITE_BEHIND_SECONDS", default=0.25)
SPECTACULAR_SETTINGS = {
    # core.converters: a string (one without a NUL character or a lone surrogate).
    "PATH_CONVERTER_OVERRIDES": {"id": str},
    "TITLE": "Agent memory API",
    # The overview above the operations, also linked from the README.
    "DESCRIPTION": (BASE_DIR / "docs" / "api.md").read_text(),
    # One tag a part of the API, in this order, each described (docs/api.md names them too).
    "TAGS": [
        {
            "name": "Attachments",
            "description": "Files attached to your chats (images, PDF, text), kept as versioned "
            "artifacts of a session: upload, list, download.",
        },
        {
            "name": "Sessions",
            "description": "Your chats as ADK sessions: create, list, rename, delete; their "
            "events, state by scope and rewind.",
        },
        {
            "name": "Memories",
            "description": "What the assistant remembers about you, with the chat turns each "
            "memory came from and its history: list, search, correct, delete.",
        },
        {
            "name": "Memory settings",
            "description": "Whether memories are created from your chats and whether replies "
            "use them.",
        },
        {
            "name": "Access",
            "description": "Grants that let a staff account read your data until a day you "
            "choose, and the log of staff access to your data.",
        },
        {
            "name": "Export",
            "description": "Everything kept about you as one JSON document (the Settings "
            "page's Export my data).",
        },
        {
            "name": "Apps",
            "description": "The service-account API of an app's own agents, with a key of "
            "the app: its end users' sessions, state and memories, the app's shared memories, "
            "generation jobs.",
        },
    ],
    "VERSION": "0.1.0",
    # 3.1: event bodies are described by the Event model's own (JSON Schema 2020-12) schema.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # PATCH bodies here are not partial updates (renaming needs its title).
    "COMPONENT_SPLIT_PATCH": False,
    # Several models have a "scope"; each choice set gets a name of its own.
    "ENUM_NAME_OVERRIDES": {
        "AccessScopeEnum": "access_app.models.AccessScope",
        "MemoryScopeEnum": "memory_app.models.MemoryScope",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "chatapp.schema.responses_add_throttled",
        "chatapp.schema.request_bodies_require_some_field",
        "agents_app.service_api.reference.service_operations_describe",
    ],
}

# --- Auth, i18n, static -------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Model permissions and sign-in (ModelBackend, first so that logins and the test client's
# force_login record it as the session's backend) and object permissions (rules); a permission
# holds when either backend grants it.
AUTHENTICATION_BACKENDS = [
    # django-axes first: a sign-in of a locked-out account or address is refused before any
    # password is hashed (it has no get_user, so force_login still records ModelBackend).
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "rules.permissions.ObjectPermissionBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"

# --- Password guessing and account farming (django-axes, sign-up limit) --------------
# Wrong passwords allowed per account and, counted apart, per client address, on every door
# that takes one (sign-in form, admin, HTTP Basic, the delete-my-data confirmation), before
# both are locked for SIGNIN_LOCKOUT_MINUTES; a success resets the count.
SIGNIN_FAILURE_LIMIT = env.int("SIGNIN_FAILURE_LIMIT", default=10)
SIGNIN_LOCKOUT_MINUTES = env.int("SIGNIN_LOCKOUT_MINUTES", default=15)
AXES_FAILURE_LIMIT = SIGNIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=SIGNIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
# The proxies in front (addresses or networks, "10.0.0.5,172.16.0.0/12"): a request from one
# is counted by the right-most X-Forwarded-For address that is not one of them
# (core.rate_limits.client_address); by the connection's address otherwise.
TRUSTED_PROXIES = env.list("TRUSTED_PROXIES", default=[])
AXES_CLIENT_IP_CALLABLE = "core.rate_limits.client_address"
AXES_USERNAME_CALLABLE = "access_app.signin.signin_username"
AXES_LOCKOUT_CALLABLE = "access_app.signin.lockout_response"
# Failures are kept (AccessAttempt, AccessFailureLog, in the staff console); successful
# sign-ins are not logged by axes: they would be one more row per visit about every user.
AXES_DISABLE_ACCESS_LOG = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True
AXES_VERBOSE = False
# Accounts a client address may create per hour; 0 turns the limit off.
SIGNUP_PER_ADDRESS_PER_HOUR = env.int("SIGNUP_PER_ADDRESS_PER_HOUR", default=5)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
FORMAT_MODULE_PATH = ["chatapp.formats"]

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "build" / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
# Attachments (artifacts): on the local file system under ARTIFACTS_DIR by default; with
# ARTIFACTS_S3_BUCKET, in an S3-compatible bucket through django-storages (install the s3 extra:
# boto3), which several web hosts can share. Credentials come from boto3's usual environment
# variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). Files are never served by the storage
# itself: every download goes through a view that checks who asks.
ARTIFACTS_DIR = Path(env.str("ARTIFACTS_DIR", default=str(BASE_DIR / "build" / "artifacts")))
ARTIFACTS_S3_BUCKET = env.str("ARTIFACTS_S3_BUCKET", default="")
ARTIFACTS_S3_ENDPOINT_URL = env.str("ARTIFACTS_S3_ENDPOINT_URL", default="")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "artifacts": (
        {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": ARTIFACTS_S3_BUCKET,
                "endpoint_url": ARTIFACTS_S3_ENDPOINT_URL or None,
                "default_acl": "private",
                "querystring_auth": True,
                "file_overwrite": False,
            },
        }
        if ARTIFACTS_S3_BUCKET
        else {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": ARTIFACTS_DIR},
        }
    ),
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "whitenoise.storage.CompressedStaticFilesStorage"
    },
}
# With DEBUG, static files are served from static/ as they are edited; otherwise from STATIC_ROOT,
# which collectstatic (run by `make run`) fills.
WHITENOISE_USE_FINDERS = DEBUG
# Files browsers ask for at the site's root (favicon.ico, for pages without an icon link: the
# admin, the API's own pages), served by whitenoise too.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"

# --- Operations: logs, probes, metrics -------------------------------------------------
# "json": one JSON object a line (time, level, logger, message, request_id, invocation_id,
# user_id), for log shippers; "text": a line for a terminal.
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.log_context.LogContextFilter"}},
    "formatters": {
        "json": {"()": "core.log_context.JsonLogFormatter"},
        "text": {"()": "core.log_context.TextLogFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["context"],
            # An unknown LOG_FORMAT is reported by the system check (chatapp.E004).
            "formatter": "json" if LOG_FORMAT == "json" else "text",
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # Django's own console handler would print its lines a second time, unformatted.
    "loggers": {
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        # django-axes narrates every sign-in at INFO; lockouts are logged by access_app.signin.
        "axes": {"level": "WARNING"},
    },
}
# /readyz: whether a missing worker heartbeat makes this process unready (it is listed anyway).
READYZ_REQUIRE_WORKERS = env.bool("READYZ_REQUIRE_WORKERS", default=True)
# /metrics answers only when this is set, and only to "Authorization: Bearer <token>".
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
