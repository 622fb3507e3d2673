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


def test_arguments_written_without_properties_are_refused_where_written(tmp_path: Path, tamesu: Any) -> None:
    # before: `parameters: {id: {type: string}}` (the arguments without `properties:` above them) validated as an
    # object's schema with an unknown keyword, and the model was offered a tool that takes no arguments
    (tmp_path / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: [{ say: "hi" }] }\n')
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot:
    type: model
    model: target
    tools:
      - { name: lookup, parameters: { id: { type: string }, description: "an order" } }
      - { name: find, parameters: { type: object, q: { type: string }, required: [q] } }
      - { name: fine, parameters: { type: object, properties: { q: { type: string } }, x-owner: { team: a } } }
tests:
  - { name: a, target: bot, scenario: { script: [ { say: hi } ] } }
""")
    done = tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "s.tamesu.yaml:6:37: targets.bot.tools[0].parameters: id is no JSON Schema keyword: the arguments go under "
        "properties (parameters: {type: object, properties: {id: ...}})",
        "s.tamesu.yaml:7:35: targets.bot.tools[1].parameters: q is no JSON Schema keyword: the arguments go under "
        "properties (parameters: {type: object, properties: {q: ...}})",
        "2 problems found"], done.stderr
