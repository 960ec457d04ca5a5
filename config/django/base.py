"""Settings for local use: every value comes from the environment (see config/env.py),
with embedded defaults (SQLite and a file-based Celery broker under var/)."""

from config.env import BASE_DIR, env_bool, env_list, env_str, local_secret_key, var_dir
from config.settings.annotate import annotate_settings
from config.settings.cache import cache_settings
from config.settings.celery import celery_settings
from config.settings.csp import csp_settings
from config.settings.database import database_settings
from config.settings.llm import judging_settings, llm_settings, mining_settings
from config.settings.prolific import prolific_settings
from config.settings.rewards import reward_settings
from config.settings.security import accounts_settings
from config.settings.uploads import UPLOAD_TEMP_DIRNAME, upload_settings

VAR_DIR = var_dir()

SECRET_KEY = env_str("SECRET_KEY") or local_secret_key(VAR_DIR)
# Off unless asked for: a 500 must never show the technical page to a stranger (docs/security.md).
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    # Failed-login throttling on /login/ and /admin/login/ (config/settings/security.py).
    "axes",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Project apps, bottom of the dependency chain first:
    # annotate -> goalstep, coscript -> judging -> mining -> llm -> core.
    "core",
    "llm",
    "mining",
    "judging",
    "goalstep",
    "coscript",
    "annotate",
    # Above annotate: publishes its studies to Prolific and reviews their participants there.
    "prolific",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The Content-Security-Policy header of every response (config/settings/csp.py).
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before CSRF's check reads a form: a body larger than this caller may send to this view
    # -> 400 naming the body, unread; one that does not arrive in time -> 408; NUL in a
    # parameter -> 400 naming it; a path integer beyond 64 bits -> 404 (core/middleware.py).
    "core.middleware.HostileRequestMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # An address with too many failed logins across usernames -> the lockout page (core/login_throttle.py).
    "core.login_throttle.LoginAddressThrottleMiddleware",
    # Every page needs a login unless its view says otherwise (login page, annotator
    # entry points, the API, which answers 401/403 itself).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A refusal (core/app_errors.py) no page answered itself -> the error page with its status.
    "core.middleware.AppErrorMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page (429).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "OPTIONS": {
            # The project's folder, each app's templates/, then each registered study kind's
            # package's templates/ (annotate/kinds/template_loader.py), cached as Django's default.
            "loaders": [
                (
                    "django.template.loaders.cached.Loader",
                    [
                        "django.template.loaders.filesystem.Loader",
                        "django.template.loaders.app_directories.Loader",
                        "annotate.kinds.template_loader.Loader",
                    ],
                )
            ],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.context_processors.roles",
            ],
        },
    },
]

DATABASES = database_settings()
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# django-axes first: a locked-out username is refused before its password is even hashed.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # The installed plotly package's plotly.min.js as vendor/plotly.min.js (core/static_finders.py).
    "core.static_finders.PlotlyFinder",
]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# collectstatic (run by `manage.py serve` with DEBUG off) gives every file a content-hashed name
# and a gzip copy; WhiteNoise serves the copy to clients that accept gzip, and a hashed name
# with Cache-Control "max-age=315360000, public, immutable" (docs/operations.md, "Static files").
# With DEBUG on, pages link the plain names and WhiteNoise serves them from the finders.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

REST_FRAMEWORK = {
    # Strict JSON for every API body: no NaN/Infinity, bounded nesting, no NUL (core/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first, so an unauthenticated API call gets 401 with a WWW-Authenticate header.
        # The product's own tokens, stored hashed, with an expiry (core/authentication.py).
        "core.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["core.permissions.IsResearcher"],
    "DEFAULT_PAGINATION_CLASS": "core.api_lists.ApiPageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    # drf-spectacular's, with the refusals every operation can give (core/api_schema.py).
    "DEFAULT_SCHEMA_CLASS": "core.api_schema.ApiAutoSchema",
    # The application's error family (core/app_errors.py) answered with its status and body.
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "How2Everything Studio API",
    "DESCRIPTION": "Procedures, topics and (in later versions) runs, studies and reports.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # A request's components apart from a response's: an upload is a file (format binary) in
    # the request, and a required string there may not be blank (minLength 1).
    "COMPONENT_SPLIT_REQUEST": True,
    # Each endpoint by its one spelling (a trailing slash); old spellings are aliases (config/urls.py).
    "PREPROCESSING_HOOKS": ["core.api_schema.schema_endpoints_canonical"],
    # One name per choice set shared by several fields (studies API: an item's role is an
    # annotation's source; a study import's status is not a run's).
    "ENUM_NAME_OVERRIDES": {
        "FormFlagEnum": "annotate.studies.create_serializers.FORM_FLAG_CHOICES",
        "RunStatusEnum": "llm.run_models.RunStatus.choices",
        # What a run shows: the stored statuses and "stalled" (llm/runs.py, run_liveness).
        "RunStatusShownEnum": "llm.runs.STATUSES_SHOWN",
        "ItemRoleEnum": "annotate.models.ItemRole.choices",
        "StudyKindEnum": "annotate.kinds.kind_choices",
        "StudyImportStatusEnum": "mining.models.CorpusImportStatus.choices",
    },
}

globals().update(cache_settings())
globals().update(annotate_settings())
globals().update(celery_settings())
globals().update(prolific_settings())
globals().update(csp_settings())
globals().update(llm_settings())
globals().update(judging_settings())
globals().update(reward_settings())
globals().update(mining_settings())
globals().update(accounts_settings())
globals().update(upload_settings())
# A file of up to FILE_UPLOAD_MAX_MEMORY_SIZE (Django's 2.5 MiB, above every cap but an
# authorised upload's) is held in memory; a larger one goes to a temporary file named after
# its process, which a sweep removes once that process is gone (core/request_bodies.py).
FILE_UPLOAD_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "core.request_bodies.PidTemporaryFileUploadHandler",
]
FILE_UPLOAD_TEMP_DIR = str(VAR_DIR / UPLOAD_TEMP_DIRNAME)
(VAR_DIR / UPLOAD_TEMP_DIRNAME).mkdir(exist_ok=True)  # Django's checks ask that it exist

# Every handler masks secrets (URL credentials, known secret values) in each line and
# traceback (core/log_filters.py). Django's own handlers are replaced, so its records
# (requests, 500s) reach these handlers too.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"mask_secrets": {"()": "core.log_filters.SecretMaskingFilter"}},
    "formatters": {
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["mask_secrets"]},
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server", "filters": ["mask_secrets"]},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
        "django.db.backends": {"level": "WARNING"},
        # One line per HTTP request to an LLM endpoint is noise; the ledger records them.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # django-axes: a warning per failed login and per lockout; not its routine chatter.
        "axes": {"level": "WARNING"},
    },
}

# Error reports (the technical 500 page with DEBUG on, e-mailed reports) mask URL
# credentials and secret values everywhere, sensitive POST parameters included (core/error_reports.py).
DEFAULT_EXCEPTION_REPORTER = "core.error_reports.MaskingExceptionReporter"
DEFAULT_EXCEPTION_REPORTER_FILTER = "core.error_reports.MaskingReporterFilter"

# Seconds the admin's "check worker" button waits for a Celery worker to answer.
WORKER_PING_TIMEOUT_SECONDS = 10
