"""Issue 30: each run's waterfalls (the agent's spans per turn, as drawn), for `tamesu view`.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("test_runs") as batch:
        batch.add_column(sa.Column("spans", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("test_runs") as batch:
        batch.drop_column("spans")
