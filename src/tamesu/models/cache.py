"""The replay cache: every model answer on disk, keyed by everything that shapes it.

A team records a run once against a real model, commits `.tamesu/cache/`, and CI replays it offline with
`--cache-only`, getting the same answers and so the same verdicts. Files are indented JSON so that a review
can read what was asked and what came back.

The key is the sha256 of canonical JSON of {provider, model, base_url, request}. `base_url` is the one the
user wrote (a template stays a template): the key must not depend on secrets, or CI could not replay
without them. The api key and headers are never part of the key, nor of the file.

The folder is meant to be committed, so no secret value is ever written to it: every entry passes through
`mask` (the run's redactor: a secret the agent repeated, in any of its encodings, becomes `***`; a replayed
answer then says `***` too). Each entry carries the sha256 of its own content (`checksum`): an entry edited
by hand no longer matches and is a miss, named as such, never a verdict quietly flipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from tamesu.models import cache_versions
from tamesu.models.base import ModelError, ModelRequest, ModelResponse
from tamesu.models.spec import CacheSpec, ModelSpec

CacheMode = Literal["use", "off", "only"]

FORMAT_VERSION = 1
"""Part of every key: bumping it retires every recorded answer at once (when the key's recipe changes)."""
Record = Callable[..., Any]


class CacheMiss(ModelError):
    """`--cache-only` and no recorded answer for this call."""


def label(spec: ModelSpec) -> str:
    return f"{spec.provider}:{spec.model}" if spec.model else spec.provider


def canonical_json(value: object) -> str:
    # sorted keys, no whitespace, unicode kept: the same value always gives the same bytes
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def checksum(entry: Mapping[str, object]) -> str:
    """sha256 of the entry's canonical JSON, without its own `checksum` field."""
    return "sha256:" + hashlib.sha256(canonical_json(entry).encode()).hexdigest()


class ReplayCache:
    """Recorded model answers under `dir`; `mode` is use (read and write), off (neither) or only (read, and
    fail on a miss)."""

    def __init__(self, dir: Path | str, mode: CacheMode = "use", mask: Callable[[Any], Any] | None = None) -> None:
        self.dir = Path(dir)
        self.mode: CacheMode = mode
        self.mask = mask or (lambda value: value)
        """Applied to every entry before it is written: the run's secrets redactor (`Redactor.data`)."""
        self._recorded: cache_versions.Recorded | None = None

    @classmethod
    def from_spec(cls, spec: CacheSpec, base_dir: Path | None = None,
                  mask: Callable[[Any], Any] | None = None) -> ReplayCache:
        """The `cache:` section; a relative `dir` is relative to `base_dir` (the project directory)."""
        path = Path(spec.dir)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return cls(path, spec.mode, mask)

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

    def get(self, spec: ModelSpec, request: ModelRequest, record: Record | None = None) -> ModelResponse | None:
        """The recorded answer, marked `cached` and costing nothing now; None on a miss (mode `use`).
        Raises CacheMiss on a miss in mode `only`. An entry that is there but cannot be trusted (edited,
        damaged) is a miss, and `record` gets a `cache_entry_rejected` event naming it and why."""
        if self.mode == "off":
            return None
        path = self.path(self.key(spec, request))
        response, problem = self._read(path)
        if response is not None:
            # what it cost when recorded stays in the file; replaying it is free
            return response.model_copy(update={"cached": True, "cost_usd": 0.0})
        where = path.relative_to(self.dir).as_posix()
        if problem is not None and record is not None:
            record("cache_entry_rejected", entry=where, reason=problem)
        if self.mode == "only":
            why = f": the entry {where} {problem}" if problem else self._stale(spec, request)
            raise CacheMiss(f"cache miss for {request.purpose} on {label(spec)} with --cache-only{why}: "
                            "record the run once without --cache-only")
        return None

    def _stale(self, spec: ModelSpec, request: ModelRequest) -> str:
        """': ' and what the cache's entries say of the miss (asked by another tamesu), or ''."""
        if self._recorded is None:
            self._recorded = cache_versions.scan(self.dir)
        why = cache_versions.other_versions(self._recorded, spec.provider, spec.model, request.purpose,
                                            FORMAT_VERSION, request.prompt_version)
        return f": {why}" if why else ""

    def put(self, spec: ModelSpec, request: ModelRequest, response: ModelResponse) -> None:
        """Record an answer (never in mode `off`; a cached answer is not written again)."""
        if self.mode == "off" or response.cached:
            return
        key = self.key(spec, request)
        entry = self.mask({
            "format": FORMAT_VERSION,
            "key": key,
            "provider": spec.provider,
            "model": spec.model,
            "base_url": spec.base_url,
            "request": request.model_dump(mode="json"),
            "response": response.model_dump(mode="json"),
        })
        entry["checksum"] = checksum(entry)
        self._write(self.path(key), json.dumps(entry, indent=2, ensure_ascii=False, sort_keys=False) + "\n")

    def forget(self, spec: ModelSpec, request: ModelRequest) -> None:
        """Drop a recorded answer the caller could not use (a structured answer that did not validate): kept, it
        would be replayed, and refused, on every later run. A replay-only cache is left as it is (committed)."""
        if self.mode != "use":
            return
        self.path(self.key(spec, request)).unlink(missing_ok=True)

    @staticmethod
    def _read(path: Path) -> tuple[ModelResponse | None, str | None]:
        """The answer, or None and what is wrong with the entry (None when there is no entry)."""
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError) as exc:
            return None, f"cannot be read ({type(exc).__name__})"
        if not isinstance(entry, dict) or "checksum" not in entry:
            return None, "has no checksum"
        if entry.pop("checksum") != checksum(entry):
            # edited by hand (or by a merge): the answer may no longer be what the model said
            return None, "does not match its checksum (edited by hand?)"
        try:
            return ModelResponse.model_validate(entry["response"]), None
        except (KeyError, TypeError, ValidationError):
            return None, "has no valid response"

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
