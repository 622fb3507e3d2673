"""The replay cache: every model answer on disk, keyed by everything that shapes it.

A team records a run once against a real model, commits `.tamesu/cache/`, and CI replays it offline with
`--cache-only`, getting the same answers and so the same verdicts. Files are indented JSON so that a review
can read what was asked and what came back.

The key is the sha256 of canonical JSON of {provider, model, base_url, request}. `base_url` is the one the
user wrote (a template stays a template): the key must not depend on secrets, or CI could not replay
without them. The api key and headers are never part of the key, nor of the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from tamesu.models.base import ModelError, ModelRequest, ModelResponse
from tamesu.models.spec import CacheSpec, ModelSpec

CacheMode = Literal["use", "off", "only"]

FORMAT_VERSION = 1
"""Part of every key: bumping it retires every recorded answer at once (when the key's recipe changes)."""


class CacheMiss(ModelError):
    """`--cache-only` and no recorded answer for this call."""


def label(spec: ModelSpec) -> str:
    return f"{spec.provider}:{spec.model}" if spec.model else spec.provider


def canonical_json(value: Any) -> str:
    # sorted keys, no whitespace, unicode kept: the same value always gives the same bytes
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ReplayCache:
    """Recorded model answers under `dir`; `mode` is use (read and write), off (neither) or only (read, and
    fail on a miss)."""

    def __init__(self, dir: Path | str, mode: CacheMode = "use") -> None:
        self.dir = Path(dir)
        self.mode: CacheMode = mode

    @classmethod
    def from_spec(cls, spec: CacheSpec, base_dir: Path | None = None) -> ReplayCache:
        """The `cache:` section; a relative `dir` is relative to `base_dir` (the project directory)."""
        path = Path(spec.dir)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return cls(path, spec.mode)

    def key(self, spec: ModelSpec, request: ModelRequest) -> str:
        keyed = {
            "format": FORMAT_VERSION,
            "provider": spec.provider,
            "model": spec.model,
            "base_url": spec.base_url,
            "request": request.model_dump(mode="json"),
        }
        return hashlib.sha256(canonical_json(keyed).encode()).hexdigest()

    def path(self, key: str) -> Path:
        # two-character fan-out keeps directories small enough to list and to diff
        return self.dir / key[:2] / f"{key}.json"

    def get(self, spec: ModelSpec, request: ModelRequest) -> ModelResponse | None:
        """The recorded answer, marked `cached` and costing nothing now; None on a miss (mode `use`).
        Raises CacheMiss on a miss in mode `only`."""
        if self.mode == "off":
            return None
        response = self._read(self.path(self.key(spec, request)))
        if response is not None:
            # what it cost when recorded stays in the file; replaying it is free
            return response.model_copy(update={"cached": True, "cost_usd": 0.0})
        if self.mode == "only":
            raise CacheMiss(f"cache miss for {request.purpose} on {label(spec)} with --cache-only: "
                            "record the run once without --cache-only")
        return None

    def put(self, spec: ModelSpec, request: ModelRequest, response: ModelResponse) -> None:
        """Record an answer (never in mode `off`; a cached answer is not written again)."""
        if self.mode == "off" or response.cached:
            return
        key = self.key(spec, request)
        record = {
            "format": FORMAT_VERSION,
            "key": key,
            "provider": spec.provider,
            "model": spec.model,
            "base_url": spec.base_url,
            "request": request.model_dump(mode="json"),
            "response": response.model_dump(mode="json"),
        }
        self._write(self.path(key), json.dumps(record, indent=2, ensure_ascii=False, sort_keys=False) + "\n")

    @staticmethod
    def _read(path: Path) -> ModelResponse | None:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            return ModelResponse.model_validate(record["response"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            # a damaged or hand-edited file is a miss: the next recording replaces it
            return None

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # write beside the target then rename: a reader (or a killed run) never sees half a file
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:8]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
