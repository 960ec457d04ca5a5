"""Settings for the test suite: the base settings with a fast password hasher.

The database comes from DATABASE_URL as everywhere else, so the same suite runs on
SQLite (default) and PostgreSQL (``DATABASE_URL=postgres://...``). Local state (the
embedded broker's folders, the generated secret key) goes to a fresh temporary
directory unless VAR_DIR is set, so tests never touch a developer's var/."""

import os
import tempfile

os.environ.setdefault("VAR_DIR", tempfile.mkdtemp(prefix="how2-test-var-"))
# pytest-xdist's workers inherit the controller's VAR_DIR: each gets a folder of its own (its
# SQLite file, embedded broker and generated key are then never shared between two workers).
if os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("HOW2_VAR_DIR_PER_WORKER"):
    os.environ["VAR_DIR"] = tempfile.mkdtemp(prefix=f"how2-test-var-{os.environ['PYTEST_XDIST_WORKER']}-")
    os.environ["HOW2_VAR_DIR_PER_WORKER"] = "1"

from config.django.base import *  # noqa: E402,F401,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False

# The scripted servers and the real inference server of the tests listen on 127.0.0.1: allowed
# (tests/test_outbound_destinations.py checks the refusals with this list emptied).
OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

# A file, not SQLite's shared-cache memory database: threads (the LLM executors, the live
# server) then see SQLite's real locking (WAL, busy timeout) instead of table locks.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405

# PostgreSQL with a transactional test's flush made of DELETEs, not one TRUNCATE of every
# table (about 20 times faster here; tests/pg_backend/base.py).
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    DATABASES["default"]["ENGINE"] = "tests.pg_backend"  # noqa: F405

# The suite runs with DEBUG off and without collectstatic: pages link the plain static names
# (the manifest of hashed names exists only after collectstatic); the live server finds the
# files through the finders. tests/test_static_compression.py runs collectstatic
# with the base settings' compressed manifest storage and checks what WhiteNoise then serves.
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
