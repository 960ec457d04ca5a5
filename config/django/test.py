"""Settings for the test suite: the base settings with a fast password hasher.

The database comes from DATABASE_URL as everywhere else, so the same suite runs on
SQLite (default) and PostgreSQL (``DATABASE_URL=postgres://...``)."""
from config.django.base import *  # noqa: F401,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False
