"""Issue 32 (root cause first): how many checks a run's failed conversation kept from grading.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("test_runs") as batch:
        batch.add_column(sa.Column("not_evaluated", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("test_runs") as batch:
        batch.drop_column("not_evaluated")
