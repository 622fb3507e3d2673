"""The run directory: one folder per run of each test, results.jsonl appended as tests finish."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tamesu._rundir import new_run_dir, slug
from tamesu.suite.secrets import Redactor

__all__ = ["RunDirectory", "new_run_dir", "slug"]

class RunDirectory:
    """Writes everything a run leaves behind, with every secret value masked."""

    def __init__(self, root: Path, redactor: Redactor) -> None:
        self.root = root
        self.redactor = redactor
        self._lock = threading.Lock()
        self._used: set[str] = set()
        self.results_path = root / "results.jsonl"

    def test_dir(self, suite: str, test: str) -> Path:
        base = f"{slug(suite)}/{slug(test)}"
        with self._lock:
            name, n = base, 1
            while name in self._used:
                n += 1
                name = f"{base}-{n}"
            self._used.add(name)
        return self.root / name

    def write_json(self, path: Path, value: BaseModel | Any) -> None:
        data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(json.dumps(self.redactor.data(data), indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
        os.replace(temporary, path)

    def append_result(self, value: BaseModel) -> None:
        """One line per finished test, flushed to disk at once so a killed run keeps it."""
        line = json.dumps(self.redactor.data(value.model_dump(mode="json")), ensure_ascii=False)
        with self._lock, self.results_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
