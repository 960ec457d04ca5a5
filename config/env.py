"""The one place where settings read the environment.

Every setting the product understands is read through these helpers, so the
table of variables in docs/configuration.md can be checked against ``grep env_ config/``.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import overload

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ImproperlyConfiguredEnv(RuntimeError):
    """An environment variable has a value the product cannot use."""


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfiguredEnv(f"{name}={value!r} is not a boolean (use true/false)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name}={value!r} is not an integer") from exc


def env_positive_int(name: str, default: int) -> int:
    """``env_int`` for counts, sizes and durations that must be at least 1."""
    value = env_int(name, default)
    if value < 1:
        raise ImproperlyConfiguredEnv(f"{name}={value} must be at least 1")
    return value


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name}={value!r} is not a number") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return list(default)
    return [part.strip() for part in value.split(",") if part.strip()]


def var_dir() -> Path:
    """Directory for local state: SQLite database, embedded broker, secret key."""
    path = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
    path.mkdir(parents=True, exist_ok=True)
    return path


def local_secret_key(directory: Path) -> str:
    """Read the local secret key, generating it once (mode 0600) if it is missing."""
    key_file = directory / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    key = secrets.token_urlsafe(50)
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process (the worker, the server) won the race
        return key_file.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key
