"""A model target tool's `parameters` that no provider takes are refused where written, not by the provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SUITE = """\
targets:
  bot:
    type: model
    model: target
    tools:
      - { name: lookup, parameters: { type: string } }
      - name: find
        parameters:
          type: object
          properties: { q: { type: strng } }
      - { name: bare, parameters: { properties: { q: { type: string } } } }
      - { name: none }
tests:
  - { name: a, target: bot, scenario: { script: [ { say: hi } ] } }
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_tool_whose_parameters_are_no_object_schema_is_refused_where_written(tmp_path: Path, tamesu: Any,
                                                                              command: str) -> None:
    # before: validate said ok, and the run was exit 3 when the provider refused the request, an infrastructure
    # failure for a mistake in the suite
    (tmp_path / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: [{ say: "hi" }] }\n')
    (tmp_path / "s.tamesu.yaml").write_text(SUITE)
    done = tamesu([command, "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "s.tamesu.yaml:6:37: targets.bot.tools[0].parameters: a tool's parameters are the JSON Schema of one object "
        "(its arguments): type must be 'object', got 'string'",
        "s.tamesu.yaml:9:11: targets.bot.tools[1].parameters: not a JSON Schema: 'strng' is not valid under any of "
        "the given schemas (at parameters.properties.q.type)",
        "2 problems found"], done.stderr
