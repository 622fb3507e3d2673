"""Alembic's environment for the store: always online, on the connection tamesu hands over."""

from __future__ import annotations

from alembic import context

from tamesu.store._tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
