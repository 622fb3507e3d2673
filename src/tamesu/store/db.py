"""The store itself: one engine, its migrations, and the writes a run makes (the view reads in `queries`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tamesu.results.records import RunResult, TestResult
from tamesu.store import CORE_HINT, EXTRA_HINT, StoreError, password_hidden
from tamesu.store.lite import (
    HEAD_REVISION,
    SERVER_WAIT_S,
    SQLITE_WAIT_S,
    _migration_lock,
    is_busy,
    set_pragmas,
    store_timeout,
    waiting_on,
)
from tamesu.store.records import (  # re-exported: the store's plain data, importable without SQLAlchemy
    PartInfo,
    RunInfo,
    test_record,
    trace_ids_of,
    transcript_hash,
    transcript_of,
    waterfalls_of,
)

try:
    import sqlalchemy as sa
    from sqlalchemy import event
    from sqlalchemy.engine import Connection, Engine
except ImportError:  # pragma: no cover - a broken install: SQLAlchemy is a core dependency
    raise StoreError(CORE_HINT) from None

from tamesu.store import _tables as t

_MIGRATIONS = Path(__file__).parent / "migrations"
_ADVISORY_LOCK = 7_154_221  # any constant: serialises migrations of shards that start at once on PostgreSQL


def _make_engine(url: str) -> tuple[Engine, float]:
    """The engine and how long its writes wait (for a SQLite file's other writers, or to reach a server)."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"store: not a database URL: {password_hidden(url)}") from exc
    if parsed.get_backend_name() == "sqlite":
        if parsed.database:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        timeout = store_timeout(SQLITE_WAIT_S)
        engine = sa.create_engine(parsed, connect_args={"timeout": timeout})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            set_pragmas(dbapi_connection, parsed.database, timeout)

        return engine, timeout
    if parsed.get_backend_name() == "postgresql":
        timeout = store_timeout(SERVER_WAIT_S)
        try:
            return sa.create_engine(parsed, pool_pre_ping=True, connect_args={
                "connect_timeout": max(1, round(timeout)), "options": "-c statement_timeout=30000"}), timeout
        except ImportError as exc:
            raise StoreError(EXTRA_HINT + f" ({exc})") from None
    raise StoreError(f"store: {parsed.get_backend_name()} is not supported (sqlite or postgresql)")


class Store:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine, self.timeout = _make_engine(url)

    @property
    def shown(self) -> str:
        return password_hidden(self.url)

    def close(self) -> None:
        self.engine.dispose()

    # migrations

    def _file(self) -> str | None:
        """The SQLite file, whose other writers a write may wait for; None for a server or memory."""
        database = self.engine.url.database
        return database if self.engine.dialect.name == "sqlite" and database and database != ":memory:" else None

    def _waiting(self) -> contextlib.AbstractContextManager[None]:
        """What may wait for the SQLite file's other writers: "database is locked" said as StoreLocked."""
        file = self._file()
        return waiting_on(file) if file else contextlib.nullcontext()

    def migrate(self) -> None:
        """Bring the schema to the newest revision (creates it in an empty database)."""
        with self._waiting():
            self._migrate()

    def _migrate(self) -> None:
        if self._stored_revision() == HEAD_REVISION:
            return  # the common case, without loading Alembic (half a second of CPU)
        from alembic import command
        from alembic.config import Config
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        head = ScriptDirectory.from_config(config).get_current_head()
        with self.engine.connect() as connection:
            if MigrationContext.configure(connection).get_current_revision() == head:
                return
        with self._migration_lock(), self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def _stored_revision(self) -> str | None:
        try:
            with self.engine.connect() as connection:
                return connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        except sa.exc.DBAPIError as exc:
            if is_busy(exc):
                raise  # another writer's lock, not an empty database
            return None  # no table yet: an empty database

    @contextlib.contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """Two shards starting at once on an empty database must not both create the tables."""
        if self.engine.dialect.name == "postgresql":
            with self.engine.connect() as holder:
                holder.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _ADVISORY_LOCK})
                try:
                    yield
                finally:
                    holder.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _ADVISORY_LOCK})
                    holder.commit()
            return
        database = self._file()
        if database is None:
            yield
            return
        with _migration_lock(database, self.timeout):  # the one `lite` takes to create a new file
            yield

    def revision(self) -> str | None:
        from alembic.runtime.migration import MigrationContext

        with self._waiting(), self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    # writes

    def begin_part(self, run: RunInfo, part: PartInfo, replace: bool = False) -> int:
        """The run's row (once, whichever shard comes first) and this part's row; its id.

        `replace` (import) first removes an earlier part of the same run and folder, so importing twice
        leaves one copy."""
        with self._waiting(), self.engine.begin() as connection:
            _insert_run(connection, run)
            if replace:
                old = connection.execute(sa.select(t.run_parts.c.id).where(
                    t.run_parts.c.run_id == run.id, t.run_parts.c.dir == part.dir)).scalars().all()
                for part_id in old:
                    _delete_part(connection, part_id)
            return int(connection.execute(t.run_parts.insert().values(
                run_id=run.id, shard=part.shard, dir=part.dir, host=part.host, started_at=part.started_at,
            ).returning(t.run_parts.c.id)).scalar_one())

    def write_test(self, run: RunInfo, part_id: int, result: TestResult, runs: list[RunResult],
                   slo: dict[str, float] | None = None) -> None:
        """One finished test with its runs, assertions and metrics, in one transaction."""
        self.write_records(run, part_id, [test_record(result, runs, slo)])

    def write_records(self, run: RunInfo, part_id: int, records: list[dict[str, Any]]) -> None:
        """Finished tests (`test_record`s) in one transaction of three statements, however many there are."""
        if not records:
            return
        with self._waiting(), self.engine.begin() as connection:
            ids = connection.execute(
                t.test_results.insert().returning(t.test_results.c.id, sort_by_parameter_order=True),
                [{**r["test"], "run_id": run.id, "part_id": part_id, "commit": run.commit,
                  "started_at": run.started_at} for r in records]).scalars().all()
            runs = [{**item["row"], "test_result_id": test_id}
                    for test_id, r in zip(ids, records, strict=True) for item in r["runs"]]
            if not runs:
                return
            run_ids = connection.execute(
                t.test_runs.insert().returning(t.test_runs.c.id, sort_by_parameter_order=True), runs).scalars().all()
            items = [item for r in records for item in r["runs"]]
            graded = [{**a, "test_run_id": run_id} for run_id, item in zip(run_ids, items, strict=True)
                      for a in item["assertions"]]
            if graded:
                connection.execute(t.assertions.insert(), graded)

    def finish_part(self, part_id: int, finished_at: str, exit_code: int, counts: dict[str, int],
                    interrupted: str | None) -> int:
        """Close the part; how many runs the store now holds (the console's pointer to `tamesu view`)."""
        with self._waiting(), self.engine.begin() as connection:
            connection.execute(t.run_parts.update().where(t.run_parts.c.id == part_id).values(
                finished_at=finished_at, exit_code=exit_code, counts=counts, interrupted=interrupted))
            return int(connection.execute(sa.select(sa.func.count()).select_from(t.runs)).scalar() or 0)


def _insert_run(connection: Connection, run: RunInfo) -> None:
    values = {"id": run.id, "started_at": run.started_at, "commit": run.commit, "branch": run.branch,
              "project": run.project, "tamesu_version": run.tamesu_version}
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]  # the other dialect's insert, same use
    # shards of one run race to create its row: the first wins, the others keep it
    connection.execute(insert(t.runs).values(**values).on_conflict_do_nothing(index_elements=["id"]))


def _delete_part(connection: Connection, part_id: int) -> None:
    # explicit, children first, so it does not depend on the database enforcing ON DELETE CASCADE
    tests = sa.select(t.test_results.c.id).where(t.test_results.c.part_id == part_id)
    runs = sa.select(t.test_runs.c.id).where(t.test_runs.c.test_result_id.in_(tests))
    connection.execute(t.assertions.delete().where(t.assertions.c.test_run_id.in_(runs)))
    connection.execute(t.test_runs.delete().where(t.test_runs.c.test_result_id.in_(tests)))
    connection.execute(t.test_results.delete().where(t.test_results.c.part_id == part_id))
    connection.execute(t.run_parts.delete().where(t.run_parts.c.id == part_id))


__all__ = ["HEAD_REVISION", "PartInfo", "RunInfo", "Store", "test_record", "trace_ids_of", "transcript_hash",
           "transcript_of", "waterfalls_of"]
