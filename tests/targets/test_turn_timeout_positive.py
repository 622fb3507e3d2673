"""`turn_timeout: 0s` is refused where written on every target type: the base `TargetSpec` refuses it, but the
types that give it another default (twilio, voice and pipecat 30s, browser 60s) declared it again without the bound,
so a zero there validated and every turn of the run timed out at once. So is every other timeout a user writes: a
model's, a hook's, `connect`'s, a browser's `step_timeout` and `load_timeout` (Playwright reads 0 as no timeout
at all: a step then waited until the test's own timeout), a rest poll's, an `http` or `command` check's, sip's."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

import tamesu
from conftest import run_tamesu
from tamesu import targets


def _specs() -> list[tuple[str, Any]]:
    found = []
    for kind in targets.known_types():
        try:
            spec = targets.target_class(kind).Spec
        except Exception:  # a type whose extra is not installed here has nothing to check
            continue
        if "turn_timeout" in spec.model_fields:
            found.append((kind, spec))
    return found


def test_every_target_types_turn_timeout_refuses_zero() -> None:
    specs = _specs()
    assert {"rest", "twilio", "voice", "browser"} <= {kind for kind, _ in specs}, specs
    accepted = []
    for kind, spec in specs:
        field = spec.model_fields["turn_timeout"]
        adapter: TypeAdapter[float] = TypeAdapter(Annotated[field.annotation, *field.metadata])  # type: ignore[name-defined]
        assert adapter.validate_python("5s") == 5.0
        try:
            adapter.validate_python("0s")
        except ValidationError:
            continue
        accepted.append(kind)
    assert accepted == [], accepted


@pytest.mark.parametrize("target", [
    '{ type: twilio, url: "ws://127.0.0.1:9/media", turn_timeout: 0s }',
    '{ type: browser, url: "http://127.0.0.1:9/", turn_timeout: 0s, chat: { input: "#i", messages: ".m" } }',
])
def test_a_zero_turn_timeout_is_one_line_where_written(tmp_path: Path, target: str) -> None:
    test = "{ name: one, target: t, scenario: { script: [ { say: hi } ] } }"
    (tmp_path / "s.yaml").write_text(f"targets:\n  t: {target}\ntests:\n  - {test}\n")
    done = run_tamesu(["validate", "s.yaml"], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "targets.t.turn_timeout: input should be greater than 0, got 0.0" in done.stdout + done.stderr


ZERO_MEANS_SOMETHING = {
    "tamesu.suite.schema.ScriptStep.timeout",  # a wait_for of 0 takes one look at what already came
    "tamesu.targets.mcp._spec.McpTargetSpec.call_timeout",  # refused by its own check (test_mcp_target.py)
    "tamesu.results.records.ModelSpend.timeouts",  # a count, not a duration
}


def test_every_timeout_a_user_writes_refuses_zero() -> None:
    accepted = []
    for found in pkgutil.walk_packages(tamesu.__path__, "tamesu."):
        if found.name.endswith("__main__") or "_proto" in found.name or found.name.startswith("tamesu.turn.") \
                or ".migrations" in found.name:  # alembic's scripts run only under alembic
            continue
        try:
            module = importlib.import_module(found.name)
        except ImportError:  # an extra not installed here
            continue
        for model in vars(module).values():
            if not (inspect.isclass(model) and issubclass(model, BaseModel) and model.__module__ == module.__name__):
                continue
            for name, field in model.model_fields.items():
                where = f"{model.__module__}.{model.__name__}.{name}"
                if ("timeout" not in name and name != "max_duration") or where in ZERO_MEANS_SOMETHING:
                    continue
                adapter: TypeAdapter[Any] = TypeAdapter(
                    Annotated[field.annotation, *field.metadata] if field.metadata  # type: ignore[name-defined]
                    else field.annotation)
                try:
                    adapter.validate_python(0)
                except ValidationError:
                    continue
                accepted.append(where)
    assert accepted == [], accepted
