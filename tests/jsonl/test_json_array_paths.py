"""A `.json` file of test cases (an array) says which case a problem is in by its index, as a suite's cases file
does (`[1].vars.x`): before, a case with no input was `case.json:3:2: a test case needs input...`, no path at all,
and a case's other problems began at the case (`assertions[0].type`), as if each were a file of its own. A JSONL
file's case is its line: its paths stay the case's own."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

NEEDS = "a test case needs input (text, a message, or a message history), turns, or a simulator with checkpoints"
UNKNOWN = ("unknown assertion type 'nope' (one of contains, equals, regex, json_path, tool_called, type, agent, "
           "script)")


def test_a_json_arrays_problems_name_their_case_at_their_place(tmp_path: Path) -> None:
    (tmp_path / "case.json").write_text(
        '[\n {"id": "fine", "input": "hi"},\n {"id": "no-input"},\n'
        ' {"id": "bad", "input": "hi", "assertions": [{"type": "nope"}]},\n'
        ' {"id": "twice", "input": "hi", "options": {"metadata": {"k": 1, "k": 2}}}\n]\n')
    (tmp_path / "case.jsonl").write_text(
        '{"id": "fine", "input": "hi"}\n{"id": "no-input"}\n'
        '{"id": "bad", "input": "hi", "assertions": [{"type": "nope"}]}\n')
    done = run_tamesu(["validate", "case.json"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    # a duplicate key stops the reading of the file: said alone, with its case's index too
    assert done.stderr.splitlines() == ["case.json:5:66: [3].options.metadata: duplicate key 'k'",
                                        "1 problem found"], done.stderr
    (tmp_path / "case.json").write_text((tmp_path / "case.json").read_text().replace(', "k": 2', ""))
    done = run_tamesu(["validate", "case.json"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"case.json:3:2: [1]: {NEEDS}",
                                        f"case.json:4:55: [2].assertions[0].type: {UNKNOWN}",
                                        "2 problems found"], done.stderr
    done = run_tamesu(["validate", "case.jsonl"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"case.jsonl:2:1: {NEEDS}",
                                        f"case.jsonl:3:54: assertions[0].type: {UNKNOWN}",
                                        "2 problems found"], done.stderr
