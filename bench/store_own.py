"""The store's own CPU on one finished run, in a process of its own: `python bench/store_own.py RUN_DIR URL
lite|full`. What a run loads anyway (the engine, the reports) is imported first and not counted; then the
clock runs over what the store adds: its imports, opening it, masking and handing over every finished test
as `tamesu run` does, and the writer thread's inserts. Prints the CPU seconds (both threads)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tamesu.cli.main
import tamesu.engine.runner  # noqa: F401
from tamesu.report.load import load_run
from tamesu.results.provenance import Provenance
from tamesu.suite.secrets import Redactor


def main() -> None:
    run_dir, url, kind = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    run = load_run(run_dir)
    tests = [(result, [d for s in result.runs if (d := run.run_result(s)) is not None]) for result in run.results]
    started = time.process_time()
    from tamesu.store.writer import StoreWriter

    store: object
    if kind == "lite":
        from tamesu.store.lite import open_lite

        store = open_lite(url)
        assert store is not None, "the store is not current: create it first"
    else:
        from tamesu.store.db import Store

        store = Store(url)
    warnings: list[str] = []
    redactor = Redactor()
    redactor.add("bench-key-not-a-real-secret")  # a run with a model key masks every record: so does this one
    origin = Provenance(run_id=f"{run_dir.name}-{kind}-{time.time_ns()}", commit=None, branch=None)
    writer = StoreWriter(store, origin, project_dir=run_dir.parent, shard=None,  # type: ignore[arg-type]
                         redact=redactor.data, warn=warnings.append,
                         secret_in=redactor.in_json)
    writer.start(None, [], run_dir)  # type: ignore[arg-type]  # the plan is not read
    for result, runs in tests:
        writer.test_finished(result, runs)
    writer.finish(run.summary, run_dir)
    spent = time.process_time() - started
    if warnings or writer.failed:
        raise SystemExit(f"the store failed: {warnings}")
    print(f"{spent:.4f}")


if __name__ == "__main__":
    main()
