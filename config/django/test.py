"""Settings for the test suite: the base settings with a fast password hasher.

The database comes from DATABASE_URL as everywhere else, so the same suite runs on
SQLite (default) and PostgreSQL (``DATABASE_URL=postgres://...``). Local state (the
embedded broker's folders, the generated secret key) goes to a fresh temporary
directory unless VAR_DIR is set, so tests never touch a developer's var/."""

import os
import tempfile

os.environ.setdefault("VAR_DIR", tempfile.mkdtemp(prefix="how2-test-var-"))

from config.django.base import *  # noqa: E402,F401,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False

# A file, not SQLite's shared-cache memory database: threads (the LLM executors, the live
# server) then see SQLite's real locking (WAL, busy timeout) instead of table locks.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
