"""Issue 29: a test's statistics over its runs and the reason the runs as a whole decided it; each run's fault.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("test_results") as batch:
        batch.add_column(sa.Column("stats", sa.JSON))
        batch.add_column(sa.Column("reason", sa.Text))
    with op.batch_alter_table("test_runs") as batch:
        batch.add_column(sa.Column("fault", sa.String(20)))
        batch.add_column(sa.Column("fault_reason", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("test_runs") as batch:
        batch.drop_column("fault_reason")
        batch.drop_column("fault")
    with op.batch_alter_table("test_results") as batch:
        batch.drop_column("reason")
        batch.drop_column("stats")
