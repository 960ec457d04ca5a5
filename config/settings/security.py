"""Security settings: the login throttle and API tokens (everywhere), and production's rules for
the secret key, DEBUG, HTTPS, HSTS, cookies and a reverse proxy (docs/security.md).

Environment variables:

* ``LOGIN_FAILURE_LIMIT`` (10) and ``LOGIN_LOCKOUT_MINUTES`` (15): after this many failed
  logins for one username from one address, that username is locked out from that address,
  on /login/ and /admin/login/, for this many minutes (django-axes).
* ``LOGIN_ADDRESS_FAILURE_LIMIT`` (100) in ``LOGIN_ADDRESS_WINDOW_MINUTES`` (60): failed logins
  from one address across all usernames before its login forms are refused (429) until the
  sliding window holds fewer (core/login_throttle.py).
* ``API_TOKEN_DAYS`` (90): an API token expires this many days after it was created.
* ``HTTPS_ONLY`` (true in production): redirect http to https, send HSTS, and send the
  session and CSRF cookies over HTTPS only. Set ``HTTPS_ONLY=false`` to try the production
  settings on a machine without TLS.
* ``SECURE_HSTS_SECONDS`` (a year when HTTPS_ONLY), ``SECURE_HSTS_PRELOAD`` (true).
* ``TRUST_PROXY_HEADERS`` (false): a reverse proxy in front of the server sets
  ``X-Forwarded-Proto`` and appends the client's address to ``X-Forwarded-For``, overwriting
  whatever the client sent. Only then are these headers believed (for "is this request
  HTTPS" and for the address a login failure is counted against).
"""

from __future__ import annotations

from datetime import timedelta

from config.env import env_bool, env_int, env_positive_int

# Django's own rule for a secret key that is not weak (security.W009).
MIN_SECRET_KEY_LENGTH = 50
MIN_SECRET_KEY_UNIQUE_CHARACTERS = 5
_INSECURE_PREFIX = "django-insecure-"

ONE_YEAR_SECONDS = 365 * 24 * 3600


def secret_key_problem(key: str | None) -> str | None:
    """Why ``key`` cannot be the production SECRET_KEY, or None if it can."""
    if not key:
        return "SECRET_KEY must be set in the environment in production mode"
    if len(key) < MIN_SECRET_KEY_LENGTH:
        return (
            f"SECRET_KEY is {len(key)} characters long; production mode needs at least "
            f'{MIN_SECRET_KEY_LENGTH} random characters (python -c "import secrets; '
            f'print(secrets.token_urlsafe(50))")'
        )
    if len(set(key)) < MIN_SECRET_KEY_UNIQUE_CHARACTERS:
        return (
            f"SECRET_KEY has {len(set(key))} distinct characters; production mode needs at "
            f"least {MIN_SECRET_KEY_UNIQUE_CHARACTERS} (use a random key)"
        )
    if key.startswith(_INSECURE_PREFIX):
        return f"SECRET_KEY starts with {_INSECURE_PREFIX!r}, Django's placeholder; use a random key"
    return None


def trust_proxy_headers() -> bool:
    return env_bool("TRUST_PROXY_HEADERS", False)


def accounts_settings() -> dict:
    """Login throttling (django-axes) and API tokens, for every settings module."""
    return {
        "AXES_ENABLED": True,
        "AXES_FAILURE_LIMIT": env_positive_int("LOGIN_FAILURE_LIMIT", 10),
        "AXES_COOLOFF_TIME": timedelta(minutes=env_positive_int("LOGIN_LOCKOUT_MINUTES", 15)),
        # One username from one address: a stranger cannot lock a researcher out from
        # elsewhere, and one address cannot guess at one username for long.
        "AXES_LOCKOUT_PARAMETERS": [["username", "ip_address"]],
        "AXES_RESET_ON_SUCCESS": True,
        # A failed login during the lockout does not extend it; it is refused all the same.
        "AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT": False,
        "AXES_LOCKOUT_CALLABLE": "core.views.login_locked_out",
        "AXES_HTTP_RESPONSE_CODE": 429,
        "AXES_CLIENT_IP_CALLABLE": "core.client_ip.client_ip",
        # The typed username, cut to the user model's length (core/login_username.py).
        "AXES_USERNAME_CALLABLE": "core.login_username.login_username",
        "TRUST_PROXY_HEADERS": trust_proxy_headers(),
        # Each failed login and each lockout is logged as a warning with the username, the
        # address and the path (for an admin, or fail2ban); the admin's "Access attempts" and
        # "Access logs" list them. The password is never stored or logged, nor the form's CSRF
        # token. No start-up banner in every process.
        "AXES_VERBOSE": False,
        "AXES_SENSITIVE_PARAMETERS": ["csrfmiddlewaretoken"],
        # Across usernames: one address spraying a password over many accounts.
        "LOGIN_ADDRESS_FAILURE_LIMIT": env_positive_int("LOGIN_ADDRESS_FAILURE_LIMIT", 100),
        "LOGIN_ADDRESS_WINDOW_MINUTES": env_positive_int("LOGIN_ADDRESS_WINDOW_MINUTES", 60),
        "API_TOKEN_DAYS": env_positive_int("API_TOKEN_DAYS", 90),
    }


def production_security_settings() -> dict:
    """HTTPS, HSTS, cookies and the proxy header for config/django/production.py."""
    https_only = env_bool("HTTPS_ONLY", True)
    secure_cookies = env_bool("SECURE_COOKIES", https_only)
    hsts_seconds = env_int("SECURE_HSTS_SECONDS", ONE_YEAR_SECONDS if https_only else 0)
    settings = {
        "SECURE_SSL_REDIRECT": https_only,
        "SECURE_HSTS_SECONDS": hsts_seconds,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": hsts_seconds > 0,
        # The header's "preload" token alone changes nothing in a browser; it lets the
        # operator submit the domain to the browsers' preload list if they choose to.
        "SECURE_HSTS_PRELOAD": hsts_seconds > 0 and env_bool("SECURE_HSTS_PRELOAD", True),
        "SESSION_COOKIE_SECURE": secure_cookies,
        "CSRF_COOKIE_SECURE": secure_cookies,
        "SESSION_COOKIE_HTTPONLY": True,
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
        "SECURE_REFERRER_POLICY": "same-origin",
        "X_FRAME_OPTIONS": "DENY",
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https") if trust_proxy_headers() else None,
    }
    return settings
