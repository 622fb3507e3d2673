"""doctor's line for a SQLite results store another writer holds locked: the store's own words, as a run says them
(how long it waited, and `TAMESU_STORE_TIMEOUT`), never the driver's bare "database is locked"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import run_tamesu


def test_a_store_another_writer_holds_locked_is_said_in_the_stores_words(tmp_path: Path) -> None:
    # before: "FAIL  results store sqlite:///.../results.db: cannot connect: OperationalError: database is locked"
    (tmp_path / "tamesu.yaml").write_text("store: results.db\n")
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }
""")
    holder = sqlite3.connect(tmp_path / "results.db", isolation_level=None)
    try:
        holder.execute("CREATE TABLE other (a)")
        holder.execute("BEGIN EXCLUSIVE")  # as a writer mid-transaction holds it
        done = run_tamesu(["doctor"], cwd=tmp_path, env={"TAMESU_STORE_TIMEOUT": "0.3"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    [line] = [line for line in done.stdout.splitlines() if line[6:].startswith("results store")]
    assert line == (f"FAIL  results store sqlite:///{tmp_path}/results.db: stayed locked by another writer: waited "
                    "0.3 s, the most a write waits (TAMESU_STORE_TIMEOUT)"), done.stdout
    assert "database is locked" not in done.stdout + done.stderr
