"""The store's tables (SQLAlchemy Core). The Alembic migrations in `migrations/` create exactly these.

One `runs` row per run, however many machines ran it: shards of one run share its key and each adds a
`run_parts` row. Rows below hold what the views read; the run folder stays the source of truth for artifacts
(`dir` columns link to it).
"""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("id", String(200), primary_key=True),
    # TAMESU_RUN_ID when set (shards of one CI run share it), else the run folder's name.
    Column("started_at", String(40), nullable=False, index=True),
    Column("commit", String(64)),
    Column("branch", String(200)),
    Column("project", String(500)),
    Column("tamesu_version", String(40)),
)

run_parts = Table(
    "run_parts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(200), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("shard", String(40)),
    Column("dir", Text, nullable=False),
    # The run folder, absolute, on the machine that ran it.
    Column("host", String(200)),
    Column("started_at", String(40), nullable=False),
    Column("finished_at", String(40)),
    Column("exit_code", Integer),
    Column("interrupted", Text),
    Column("counts", JSON),
)

test_results = Table(
    "test_results", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(200), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("part_id", Integer, ForeignKey("run_parts.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("test_id", String(500), nullable=False),
    Column("suite", String(300), nullable=False),
    Column("name", String(300), nullable=False),
    Column("case_name", String(300)),
    Column("tags", JSON),
    Column("target", String(200)),
    Column("status", String(20), nullable=False),
    Column("passed_runs", Integer, nullable=False),
    Column("total_runs", Integer, nullable=False),
    Column("pass_threshold", Float),
    Column("duration_ms", Float),
    Column("quarantine", Text),
    Column("skip_reason", Text),
    Column("commit", String(64)),
    # The run's commit again, so flakiness (passed and failed on one commit) needs no join.
    Column("started_at", String(40), nullable=False),
    Column("slo", JSON),
    # The test's SLOs (metric -> limit) when the run recorded them.
    Column("stats", JSON),
    # A repeated test's statistics (results.stats.RepeatStats): pass rate, interval, pass@k, pass^k.
    Column("reason", Text),
    Index("ix_test_results_run", "run_id", "test_id"),
    Index("ix_test_results_test", "test_id", "started_at"),
)

test_runs = Table(
    "test_runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("test_result_id", Integer, ForeignKey("test_results.id", ondelete="CASCADE"), nullable=False,
           index=True),
    Column("number", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(20), nullable=False),
    Column("error", Text),
    Column("fault", String(20)),
    Column("fault_reason", Text),
    Column("end_reason", String(40)),
    Column("duration_ms", Float),
    Column("dir", Text),
    # The run's folder, relative to the run folder.
    Column("target_type", String(40)),
    Column("transcript", JSON),
    # [{role, text, turn}] as in transcript.json (already masked).
    Column("transcript_hash", String(64), index=True),
    # sha256 of the transcript's text: the same conversation graded twice has the same hash.
    Column("trace_ids", JSON),
    # The W3C trace id sent with each turn, in turn order.
    Column("spans", JSON),
    # `traces:`: each turn's waterfall by turn number (report.waterfall.TurnSpans: at most 200 spans a turn; "0":
    # the spans before the first turn).
    Column("llm_cost_usd", Float),
    Column("llm_tokens", Integer),
    Column("metrics", JSON),
    # {name: value}: one column rather than a row per metric, so writing a test stays cheap; PostgreSQL reads
    # a value as metrics->>'turn_latency_ms_p95'
    Column("not_evaluated", Integer),
    # The checks the run's root cause (a failed conversation, an error) kept from grading; NULL when none,
    # and in rows written before revision 0004 (docs/faults.md, "Root cause first").
)

assertions = Table(
    "assertions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("test_run_id", Integer, ForeignKey("test_runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("name", String(300), nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("reason", Text),
    Column("score", Float),
    Column("on_turn", String(20)),
    Column("model", String(200)),
    Column("prompt_version", String(80)),
    Column("fake", Boolean),
)
