"""The store itself: one engine, its migrations, and the writes a run makes (the view reads in `queries`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tamesu.report.waterfall import by_turn
from tamesu.results.records import RunResult, TestResult
from tamesu.store import CORE_HINT, EXTRA_HINT, StoreError, shown_url
from tamesu.telemetry.spans import SpansFile

try:
    import sqlalchemy as sa
    from sqlalchemy import event
    from sqlalchemy.engine import Connection, Engine
except ImportError:  # pragma: no cover - a broken install: SQLAlchemy is a core dependency
    raise StoreError(CORE_HINT) from None

from tamesu.store import _tables as t


def _timeout() -> float:
    """How long a write waits for a locked SQLite file or an unreachable server before it gives up
    (TAMESU_STORE_TIMEOUT seconds, default 5)."""
    import math
    import os

    given = os.environ.get("TAMESU_STORE_TIMEOUT", "").strip()
    if not given:
        return 5.0
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise StoreError(f"TAMESU_STORE_TIMEOUT: expected a number of seconds above 0, got {given!r}")
    return max(0.05, seconds)

_MIGRATIONS = Path(__file__).parent / "migrations"
HEAD_REVISION = "0004"
"""The newest migration; a store already there is opened without loading Alembic (a test keeps it true)."""
_ADVISORY_LOCK = 7_154_221  # any constant: serialises migrations of shards that start at once on PostgreSQL


@dataclass
class RunInfo:
    """What a run row holds: the same for every shard of one run."""

    id: str
    started_at: str
    commit: str | None = None
    branch: str | None = None
    project: str | None = None
    tamesu_version: str | None = None


@dataclass
class PartInfo:
    """One invocation (a shard, or the whole run) and its folder."""

    dir: str
    started_at: str
    shard: str | None = None
    host: str | None = None


def _make_engine(url: str) -> Engine:
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"store: not a database URL: {shown_url(url)}") from exc
    if parsed.get_backend_name() == "sqlite":
        if parsed.database:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(parsed, connect_args={"timeout": _timeout()})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            # WAL lets `tamesu view` read while runs write; NORMAL syncs at checkpoints, not every commit
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    if parsed.get_backend_name() == "postgresql":
        try:
            return sa.create_engine(parsed, pool_pre_ping=True, connect_args={
                "connect_timeout": max(1, round(_timeout())), "options": "-c statement_timeout=30000"})
        except ImportError as exc:
            raise StoreError(EXTRA_HINT + f" ({exc})") from None
    raise StoreError(f"store: {parsed.get_backend_name()} is not supported (sqlite or postgresql)")


class Store:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = _make_engine(url)

    @property
    def shown(self) -> str:
        return shown_url(self.url)

    def close(self) -> None:
        self.engine.dispose()

    # migrations

    def migrate(self) -> None:
        """Bring the schema to the newest revision (creates it in an empty database)."""
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
        except sa.exc.DBAPIError:
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
        database = self.engine.url.database
        if not database or database == ":memory:":
            yield
            return
        import fcntl

        with open(database + ".migrate-lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def revision(self) -> str | None:
        from alembic.runtime.migration import MigrationContext

        with self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    # writes

    def begin_part(self, run: RunInfo, part: PartInfo, replace: bool = False) -> int:
        """The run's row (once, whichever shard comes first) and this part's row; its id.

        `replace` (import) first removes an earlier part of the same run and folder, so importing twice
        leaves one copy."""
        with self.engine.begin() as connection:
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
        with self.engine.begin() as connection:
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
        with self.engine.begin() as connection:
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


def test_record(result: TestResult, runs: list[RunResult], slo: dict[str, float] | None = None,
                run_dir: Path | None = None) -> dict[str, object]:
    """What the store keeps of a finished test, as plain data: small (no raw responses, no events, at most
    MAX_ROWS spans a turn), so the run pays little to hand it over and a redactor can mask it whole. The
    spans are read from the runs' spans.json in `run_dir`, the run folder."""
    by_key = {(r.run, r.attempt): r for r in runs}
    items = []
    for summary in result.runs:
        detail = by_key.get((summary.run, summary.attempts))
        transcript = transcript_of(detail) if detail is not None else []
        metrics = dict(detail.metrics if detail is not None else summary.metrics)
        graded = detail.assertions if detail is not None else summary.failures
        items.append({
            "row": {"number": summary.run, "attempt": summary.attempts, "status": summary.status,
                    "error": summary.error, "fault": summary.fault, "fault_reason": summary.fault_reason,
                    "end_reason": detail.end_reason if detail else None,
                    "duration_ms": detail.duration_ms if detail else None, "dir": summary.dir,
                    "target_type": detail.target_type if detail else None, "transcript": transcript,
                    "transcript_hash": transcript_hash(transcript) if transcript else None,
                    "trace_ids": trace_ids_of(detail) if detail else None,
                    "spans": waterfalls_of(detail, run_dir / summary.dir) if detail and run_dir else None,
                    "llm_cost_usd": metrics.get("llm_cost_usd"),
                    "llm_tokens": int(metrics["llm_tokens"]) if "llm_tokens" in metrics else None,
                    "metrics": {name: float(value) for name, value in metrics.items()},
                    "not_evaluated": summary.not_evaluated or None},
            "assertions": [{"name": a.name, "passed": a.passed, "reason": a.reason, "score": a.score,
                            "on_turn": None if a.on_turn is None else str(a.on_turn), "model": a.model,
                            "prompt_version": a.prompt_version, "fake": a.fake} for a in graded],
        })
    return {"test": {"test_id": result.id, "suite": result.suite, "name": result.test, "case_name": result.case,
                     "tags": list(result.tags), "target": result.target, "status": result.status,
                     "passed_runs": result.passed_runs, "total_runs": result.total_runs,
                     "pass_threshold": result.pass_threshold, "duration_ms": result.duration_ms,
                     "quarantine": result.quarantine, "skip_reason": result.skip_reason, "slo": slo or None,
                     "stats": result.stats.model_dump(mode="json") if result.stats else None,
                     "reason": result.reason},
            "runs": items}


def transcript_of(result: RunResult) -> list[dict[str, object]]:
    """The conversation as transcript.json has it: who said what, turn by turn."""
    lines: list[dict[str, object]] = []
    for turn in result.turns:
        if turn.user is not None:
            lines.append({"role": "user", "text": turn.user.display(), "turn": turn.index})
        lines.append({"role": "agent", "text": turn.agent.text, "turn": turn.index})
    return lines


def transcript_hash(lines: Sequence[Mapping[str, object]]) -> str:
    text = json.dumps([[line["role"], line["text"]] for line in lines], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def waterfalls_of(result: RunResult, folder: Path) -> dict[str, object] | None:
    """Each turn's waterfall (`traces:`), from the run's spans.json; None without one."""
    try:
        spans = SpansFile.model_validate_json((folder / "spans.json").read_bytes())
    except (OSError, ValueError):
        return None
    drawn = by_turn({turn.index: turn.agent.latency_ms for turn in result.turns}, spans)
    return {index: turn.model_dump(mode="json") for index, turn in drawn.items()} or None


def trace_ids_of(result: RunResult) -> list[str] | None:
    ids = [turn.agent.trace_id for turn in result.turns if turn.agent.trace_id]
    return ids or None
