"""The results store: every finished test of every run in SQLite (on by default) or PostgreSQL.

History is on unless turned off (`store: false`, `TAMESU_STORE=off`): a user finds a flaky test in the runs
that already happened, not only in those after they thought to turn it on. SQLAlchemy and Alembic are core
dependencies; PostgreSQL's driver is the `store` extra. This module stays light (no SQLAlchemy import): it only
decides which store, if any, a run writes to, so `tamesu validate` and `--version` never load it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tamesu.types import STORE_OFF_WORDS, STORE_ON_WORDS, store_word_problem

EXTRA_HINT = "the results store on PostgreSQL needs the store extra: pip install 'tamesu[store]'"
CORE_HINT = "the results store needs SQLAlchemy, part of tamesu's own install: pip install --force-reinstall tamesu"
DEFAULT_SQLITE = ".tamesu/store.db"
"""Where `store: true` (or `store: sqlite`) keeps the SQLite file, from the project's folder."""

_OFF = STORE_OFF_WORDS
_ON = STORE_ON_WORDS


class StoreError(Exception):
    """The store cannot be used: the extra is missing, the URL is wrong, the database is down."""


class StoreLocked(StoreError):
    """Another writer (a run beside this one, `tamesu store import`) kept a SQLite store locked for longer than
    a write waits: one line naming the file and how long this waited."""

    def __init__(self, path: str, waited: float) -> None:
        super().__init__(f"store: {path} stayed locked by another writer: waited {waited:.1f} s, the most a write "
                         "waits (TAMESU_STORE_TIMEOUT)")
        self.path = path
        self.waited = waited


def store_url(setting: str | bool | None, project_dir: Path, environ: dict[str, str] | None = None) -> str | None:
    """The SQLAlchemy URL the run writes to, or None when the store is off.

    `TAMESU_STORE` wins over `store:` in tamesu.yaml (so a password stays out of the file); either may be
    `true`/`sqlite` (the project's own SQLite file), `off`, a path to a SQLite file, `sqlite:///...` or
    `postgresql://...`. An empty `TAMESU_STORE` (`TAMESU_STORE=` in a CI file, `${STORE:-}` unset) is unset,
    as a shell's `${VAR:-default}` reads it: the file's `store:` stands; `TAMESU_STORE=off` turns a store off.
    Neither given: the project's SQLite file (`is_default` says so).
    """
    raw = _setting(setting, environ)
    if raw is None:
        raw = True  # history on by default
    if raw is False:
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
    problem = store_word_problem(text)
    if problem:
        raise StoreError(f"{'TAMESU_STORE' if _from_env(environ) else 'store'}: {problem}")
    path = Path(text).expanduser()
    return "sqlite:///" + str((path if path.is_absolute() else project_dir / path).resolve())


def _from_env(environ: dict[str, str] | None) -> bool:
    return _setting(None, environ) is not None  # the setting is TAMESU_STORE's


def _setting(setting: str | bool | None, environ: dict[str, str] | None) -> str | bool | None:
    env = os.environ if environ is None else environ
    given = env.get("TAMESU_STORE")
    return setting if given is None or not given.strip() else given


def is_default(setting: str | bool | None, environ: dict[str, str] | None = None) -> bool:
    """No one asked for a store: the default SQLite file, which must never stop a run that cannot create it
    (a read-only checkout): it is then a warning, where a store someone configured is an error."""
    return _setting(setting, environ) is None


def password_hidden(url: str) -> str:
    """A database URL as the store's lines name it: its user kept (which role the store is opened as, which the
    driver's own errors name too), its password `***` and its query `?...` (libpq reads `?password=` as well).

    Not `net.urls.shown_url`, which hides the whole `user:password@` of an agent's URL, where a token may stand
    alone. Parsed by hand, not by urlsplit: a password is often written unescaped (`#`, `/`, `?`, `@` in it), so
    everything before the last `@` is the userinfo; a SQLite path (`sqlite:///...`) has none, `@` and `:` in it
    are a folder's name."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    userinfo = ""
    if not rest.startswith("/") and "@" in rest:
        credentials, _, rest = rest.rpartition("@")
        user, colon, _ = credentials.partition(":")
        userinfo = f"{user}:***@" if colon else f"{user}@"
    where, query, _ = rest.partition("?")
    return f"{scheme}://{userinfo}{where}{'?...' if query else ''}"
