"""`tamesu view` of a SQLite store that is not there says so in one line and makes none (before, a mistyped
`--store histroy.db` made an empty store there and served "no runs in the store yet")."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu


def test_a_store_that_is_not_there_is_said_and_never_made(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: ['*.tamesu.yaml']\n")
    typo = run_tamesu(["view", "--no-open", "--port", "0", "--store", "histroy.db"], cwd=tmp_path, timeout=60)
    assert typo.returncode == 2, typo.stdout + typo.stderr
    assert typo.stderr.strip() == (f"no store at {tmp_path}/histroy.db: no run has written one there (a run with "
                                   "the store on makes it; `tamesu store import RUN_DIR` fills it in)")
    assert not (tmp_path / "histroy.db").exists()
    fresh = run_tamesu(["view", "--no-open", "--port", "0"], cwd=tmp_path, timeout=60)  # no run yet: no store
    assert fresh.returncode == 2 and f"no store at {tmp_path}/.tamesu/store.db" in fresh.stderr, fresh.stderr
    assert not (tmp_path / ".tamesu").exists()


def test_a_store_turned_off_is_named_as_why_there_is_none(tmp_path: Path) -> None:
    # before: "no run has written one there", with nothing saying the project's own setting is why
    (tmp_path / "tamesu.yaml").write_text("suites: ['*.tamesu.yaml']\nstore: false\n")
    done = run_tamesu(["view", "--no-open", "--port", "0"], cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().startswith(f"no store at {tmp_path}/.tamesu/store.db: the store is off (store: false "
                                          "in tamesu.yaml or TAMESU_STORE=off), so no run writes one"), done.stderr
    (tmp_path / "tamesu.yaml").write_text("suites: ['*.tamesu.yaml']\n")
    done = run_tamesu(["view", "--no-open", "--port", "0"], cwd=tmp_path, timeout=60, env={"TAMESU_STORE": "off"})
    assert done.returncode == 2 and "the store is off" in done.stderr, done.stderr
