"""The results store: every finished test of every run in SQLite (the default) or PostgreSQL.

This module stays light (no SQLAlchemy import): it only decides which store, if any, a run writes to, so
`tamesu run` without a store never loads the optional extra.
"""

from __future__ import annotations

import os
from pathlib import Path

EXTRA_HINT = "the results store needs the store extra: pip install 'tamesu[store]'"
DEFAULT_SQLITE = ".tamesu/store.db"
"""Where `store: true` (or `store: sqlite`) keeps the SQLite file, from the project's folder."""

_OFF = {"", "off", "false", "no", "0", "none"}
_ON = {"on", "true", "yes", "1", "sqlite"}


class StoreError(Exception):
    """The store cannot be used: the extra is missing, the URL is wrong, the database is down."""


def store_url(setting: str | bool | None, project_dir: Path, environ: dict[str, str] | None = None) -> str | None:
    """The SQLAlchemy URL the run writes to, or None when no store is configured.

    `TAMESU_STORE` wins over `store:` in tamesu.yaml (so a password stays out of the file); either may be
    `true`/`sqlite` (the project's own SQLite file), `off`, a path to a SQLite file, `sqlite:///...` or
    `postgresql://...`. An empty `TAMESU_STORE` (`TAMESU_STORE=` in a CI file, `${STORE:-}` unset) is unset,
    as a shell's `${VAR:-default}` reads it: the file's `store:` stands; `TAMESU_STORE=off` turns a store off.
    """
    env = os.environ if environ is None else environ
    given = env.get("TAMESU_STORE")
    raw: str | bool | None = setting if given is None or not given.strip() else given
    if raw is None or raw is False:
        return None
    text = "true" if raw is True else str(raw).strip()
    if text.lower() in _OFF:
        return None
    if text.lower() in _ON:
        return "sqlite:///" + str((project_dir / DEFAULT_SQLITE).resolve())
    if text.startswith(("postgresql://", "postgres://")):
        # psycopg 3 is the driver the extra installs
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if "://" in text:
        return text
    path = Path(text)
    return "sqlite:///" + str((path if path.is_absolute() else project_dir / path).resolve())


def shown_url(url: str) -> str:
    """A URL as warnings print it: never the password."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in credentials else f"{scheme}://{user}@{host}"
