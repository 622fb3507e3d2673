"""`turn_timeout: 0s` is refused where written on every target type: the base `TargetSpec` refuses it, but the
types that give it another default (twilio, voice and pipecat 30s, browser 60s) declared it again without the bound,
so a zero there validated and every turn of the run timed out at once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter, ValidationError

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
