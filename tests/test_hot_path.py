"""The cheaper paths a run takes per test and per turn write and read exactly what the slower ones did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tamesu.engine.artifacts import RunDirectory, indented_json
from tamesu.suite._yaml import load_yaml
from tamesu.suite.secrets import Redactor


def test_write_json_twice_in_one_folder(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, Redactor())
    run = tmp_path / "suite" / "test" / "run-1"
    directory.write_json(run / "transcript.json", {"lines": [{"text": "hi"}]})
    directory.write_json(run / "result.json", {"status": "passed"})
    assert json.loads((run / "transcript.json").read_text()) == {"lines": [{"text": "hi"}]}
    assert (run / "result.json").read_text() == '{\n  "status": "passed"\n}\n'
    assert sorted(p.name for p in run.iterdir()) == ["result.json", "transcript.json"]


DOCUMENTS = [
    {"turns": [{"user": {"text": "où est ma commande ? \u2028 <b>&</b>", "files": []}, "agent": {
        "raw": [{"nested": {"deep": [1, 2.5, -0.0, True, None, 12345678901234567890]}}], "ms": 1.25}}],
     "empty": {}, "none": [], "control": "tab\tnew\nline\u0000\u001f", "quote": "\"\\/"},
    [], {}, "text", 0, [[[]]], {"a": [{}]},
]


@pytest.mark.parametrize("data", DOCUMENTS)
def test_indented_json_writes_the_text_json_dumps_does(data: Any) -> None:
    assert indented_json(data).decode("utf-8") == json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def test_write_json_masks_secrets_and_refuses_what_utf8_cannot_hold(tmp_path: Path) -> None:
    redactor = Redactor()
    redactor.add("s3cr3t-value")
    directory = RunDirectory(tmp_path, redactor)
    directory.write_json(tmp_path / "r.json", {"said": "the key is s3cr3t-value", "n": [1.5]})
    assert json.loads((tmp_path / "r.json").read_text()) == {"said": "the key is ***", "n": [1.5]}
    with pytest.raises(ValueError):  # a lone surrogate from an agent's JSON: as json.dumps + utf-8 refused it
        directory.write_json(tmp_path / "s.json", {"said": json.loads('"\\ud800"')})


YAML_TEXTS = [
    "targets:\n  bot: { type: rest, url: 'http://x/chat' }  # trailing\n# a comment line\ntests:\n"
    "  - name: a\n    target: bot\n    scenario: { max_turns: 2, script: [ { say: hi }, { say: 'there' } ] }\n"
    "  - name: b\n    vars:\n      k: |\n        block # not a comment\n      f: 1.5\n",
    "a:\n  - 1\n  -   x: [1, {y: 2}]\n      z: ~\n",
]


@pytest.mark.parametrize("text", YAML_TEXTS)
def test_yaml_positions_match_the_round_trip_reader(tmp_path: Path, text: str) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    document = load_yaml(path)
    reference = YAML(typ="rt").load(text)
    assert document.data == json.loads(json.dumps(reference))

    def walk(node: Any, loc: list[Any]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                assert document.position([*loc, key], key=True) == tuple(x + 1 for x in node.lc.key(key))
                assert document.position([*loc, key]) == tuple(x + 1 for x in node.lc.value(key))
                walk(value, [*loc, key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                assert document.position([*loc, index]) == tuple(x + 1 for x in node.lc.item(index))
                walk(value, [*loc, index])

    walk(reference, [])
