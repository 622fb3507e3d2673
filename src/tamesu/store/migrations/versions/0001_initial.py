"""The first store: runs, their parts (shards), test results, runs of tests (with their metrics), assertions.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("commit", sa.String(64)),
        sa.Column("branch", sa.String(200)),
        sa.Column("project", sa.String(500)),
        sa.Column("tamesu_version", sa.String(40)),
    )
    op.create_index("ix_runs_started_at", "runs", ["started_at"])
    op.create_table(
        "run_parts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("shard", sa.String(40)),
        sa.Column("dir", sa.Text, nullable=False),
        sa.Column("host", sa.String(200)),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("finished_at", sa.String(40)),
        sa.Column("exit_code", sa.Integer),
        sa.Column("interrupted", sa.Text),
        sa.Column("counts", sa.JSON),
    )
    op.create_index("ix_run_parts_run_id", "run_parts", ["run_id"])
    op.create_table(
        "test_results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("part_id", sa.Integer, sa.ForeignKey("run_parts.id", ondelete="CASCADE"), nullable=False),
        sa.Column("test_id", sa.String(500), nullable=False),
        sa.Column("suite", sa.String(300), nullable=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("case_name", sa.String(300)),
        sa.Column("tags", sa.JSON),
        sa.Column("target", sa.String(200)),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("passed_runs", sa.Integer, nullable=False),
        sa.Column("total_runs", sa.Integer, nullable=False),
        sa.Column("pass_threshold", sa.Float),
        sa.Column("duration_ms", sa.Float),
        sa.Column("quarantine", sa.Text),
        sa.Column("skip_reason", sa.Text),
        sa.Column("commit", sa.String(64)),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("slo", sa.JSON),
    )
    op.create_index("ix_test_results_part_id", "test_results", ["part_id"])
    op.create_index("ix_test_results_run", "test_results", ["run_id", "test_id"])
    op.create_index("ix_test_results_test", "test_results", ["test_id", "started_at"])
    op.create_table(
        "test_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("test_result_id", sa.Integer, sa.ForeignKey("test_results.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("end_reason", sa.String(40)),
        sa.Column("duration_ms", sa.Float),
        sa.Column("dir", sa.Text),
        sa.Column("target_type", sa.String(40)),
        sa.Column("transcript", sa.JSON),
        sa.Column("transcript_hash", sa.String(64)),
        sa.Column("trace_ids", sa.JSON),
        sa.Column("llm_cost_usd", sa.Float),
        sa.Column("llm_tokens", sa.Integer),
        sa.Column("metrics", sa.JSON),
    )
    op.create_index("ix_test_runs_test_result_id", "test_runs", ["test_result_id"])
    op.create_index("ix_test_runs_transcript_hash", "test_runs", ["transcript_hash"])
    op.create_table(
        "assertions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("test_run_id", sa.Integer, sa.ForeignKey("test_runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("score", sa.Float),
        sa.Column("on_turn", sa.String(20)),
        sa.Column("model", sa.String(200)),
        sa.Column("prompt_version", sa.String(80)),
        sa.Column("fake", sa.Boolean),
    )
    op.create_index("ix_assertions_test_run_id", "assertions", ["test_run_id"])


def downgrade() -> None:
    for table in ("assertions", "test_runs", "test_results", "run_parts", "runs"):
        op.drop_table(table)
