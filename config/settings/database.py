"""DATABASE_URL: SQLite under var/ by default, PostgreSQL (or anything dj-database-url reads) when set."""

import dj_database_url

from config.env import env_int, env_str, var_dir


def database_settings() -> dict:
    default_url = f"sqlite:///{var_dir() / 'db.sqlite3'}"
    url = env_str("DATABASE_URL", default_url) or default_url
    config = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60))
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # The web server and the Celery worker write to the same file: WAL lets readers
        # proceed during a write, IMMEDIATE transactions avoid lock-upgrade deadlocks.
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
    return {"default": config}
