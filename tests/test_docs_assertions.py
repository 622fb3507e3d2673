"""docs/assertions.md as a new user reads it: its table names every assertion key (the model-graded ones, a phone
call's, the spans' had no row: a reader of the page never learnt `judge` existed), and the `custom` row's project
function, written as the row says, passes a real run (the row showed `script`'s function, whose `run.text` the
run's view has not, and no way to give a project function its `with:`); each row names every option its
assertion takes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from tamesu import plugins
from tamesu.net.serve import ThreadServer

PAGE = Path(__file__).resolve().parent.parent / "docs" / "assertions.md"


def _rows() -> dict[str, str]:
    """Each table row of the page by every key its first cell names."""
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            first, rest = line[2:].split(" | ", 1)
            rows.update({key: rest for key in re.findall(r"`([a-z_]+)`", first)})
    return rows


def test_every_assertion_key_has_a_row() -> None:
    keys = set(plugins.built_in_names("checks")) - {"pack"}  # `pack: NAME` has its own section, "Packs"
    assert len(keys) > 25
    assert not keys - set(_rows()), sorted(keys - set(_rows()))


async def _chat(request: Request) -> JSONResponse:
    del request
    return JSONResponse({"reply": "Your refund is on its way."})


def test_the_custom_rows_project_function_runs_as_written(tmp_path: Path,
                                                          serve: Callable[[Any], ThreadServer]) -> None:
    row = _rows()["custom"]
    written = re.search(r"`(\{function: checks:(\w+), with: \{(\w+): (\w+)\}\})`", row)
    assert written, "the row shows a project function given its `with:`"
    reads = re.search(r"`run\.(\w+\(\))`", row)
    assert reads, "the row says how the function reads the agent's text"
    function, parameter, value = written.group(2), written.group(3), written.group(4)
    (tmp_path / "checks.py").write_text(f"def {function}(run, {parameter}):\n"
                                        f"    return {parameter} in run.{reads.group(1)}\n", encoding="utf-8")
    server = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])]))
    suite = {"targets": {"shop": {"type": "rest", "url": f"{server.url}/chat"}},
             "tests": [{"name": "says refund", "scenario": {"script": [{"say": "Where is my refund?"}]},
                        "assert": [{"custom": {"function": f"checks:{function}", "with": {parameter: value}}}]}]}
    (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], tmp_path, env={"TAMESU_STORE": "off"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  suite/says refund" in done.stdout


def test_each_rows_assertion_names_every_option_it_takes() -> None:
    # the rows left out options a reader could not then find: `metric`'s `missing: pass`, `captured`'s `equals`
    # and `exists`, `handoff`'s `model`, the audio turns' `match` and `similarity` of `contains` and `regex`
    from tamesu.checks import captured, command, handoff, http, json_path, metric, status, text, tools, turns, values

    specs = {"contains": text.TextSpec, "regex": text.PatternSpec, "json_path": json_path.PathSpec,
             "status": status.StatusSpec, "turns": turns.TurnsSpec, "metric": metric.MetricSpec,
             "captured": captured.CapturedSpec, "http": http.HttpSpec, "command": command.CommandSpec,
             "handoff": handoff.HandoffSpec, "tool_called": tools.CallSpec, "tool_sequence": tools.SequenceSpec,
             "equals": values.EqualsSpec, "type": values.TypeSpec}
    rows = _rows()
    for key, spec in specs.items():
        options = {field.alias or name for name, field in spec.model_fields.items()}
        named = set(re.findall(r"[`{,] ?([a-z_]+)(?=[:,}` ])", rows[key]))
        assert options <= named, (key, sorted(options - named))
