"""A target type's keys come from its own spec model (no hand-kept list), so `validate` names the type a stray
key belongs to: a built type, or one not built yet (a small declared list until it lands)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tamesu import targets
from tamesu.plan import load_plan
from tamesu.targets.a2a import A2ASpec


def test_keys_are_the_spec_models_fields() -> None:
    assert targets.keys_of("a2a") == frozenset(A2ASpec.model_fields) | {
        f.alias for f in A2ASpec.model_fields.values() if f.alias}
    assert {"allow_tools", "command", "system"} <= targets.keys_of("mcp")  # mcp's own and the model's it extends
    assert targets.foreign_key_owner("rest", "skill") == "a2a"
    assert targets.foreign_key_owner("rest", "viewport") == "browser"  # not built yet: declared
    assert targets.foreign_key_owner("rest", "url") is None  # rest's own
    assert targets.foreign_key_owner("rest", "no_such_key") is None


def test_validate_warns_about_a_key_of_a_type_not_built_yet(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          api: { type: rest, url: "http://127.0.0.1:9/chat", viewport: { width: 800 } }
        tests:
          - name: a
            target: api
            scenario: { script: [ { say: hi } ] }
        """))
    plan = load_plan([tmp_path / "suite.yaml"], require_secrets=False)
    assert [str(w).split(": ", 1)[1] for w in plan.warnings] == [
        "targets.api.viewport: 'viewport' is a key of browser targets, not rest; ignored"]
