"""Production settings: a strong SECRET_KEY from the environment, DEBUG off (DEBUG=true is
refused), HTTPS with HSTS unless HTTPS_ONLY=false, the proxy header trusted only when
TRUST_PROXY_HEADERS=true (config/settings/security.py, docs/security.md).
`manage.py check --deploy` is clean with these settings (tests/security/test_settings_hardening.py)."""

from django.core.exceptions import ImproperlyConfigured

from config.django.base import *  # noqa: F401,F403
from config.env import env_bool, env_str
from config.settings.security import production_security_settings, secret_key_problem

SECRET_KEY = env_str("SECRET_KEY", "")
_problem = secret_key_problem(SECRET_KEY)
if _problem:
    raise ImproperlyConfigured(_problem)
if env_bool("DEBUG", False):
    raise ImproperlyConfigured(
        "DEBUG=true is refused in production mode: the debug pages show settings, code and "
        "tracebacks to anyone. Unset DEBUG, or use config.django.base on a development machine."
    )
DEBUG = False

globals().update(production_security_settings())

# STORAGES comes from the base settings: hashed, gzip-compressed static files (run collectstatic).
