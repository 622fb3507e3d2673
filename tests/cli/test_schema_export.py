"""`tamesu schema` and the modeline `tamesu init` writes: JSON Schemas from the loader's own models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from tamesu.suite.yaml_reader import load_yaml, parse_yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("schema-export")
"""In one xdist worker the `schemas` fixture runs once: two `tamesu schema` forks (0.7 s of CPU) and the
metaschema check (1 s), which every worker that ran one of its three tests paid again."""


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    from conftest import run_tamesu

    folder = tmp_path_factory.mktemp("schema")
    found = {}
    for kind in ("suite", "project"):
        printed = run_tamesu(["schema", kind], cwd=folder)
        assert printed.returncode == 0, printed.stderr
        found[kind] = json.loads(printed.stdout)
        jsonschema.Draft202012Validator.check_schema(found[kind])
    return found


def _errors(schema: dict, data: object) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in validator.iter_errors(data)]


def test_what_the_loader_accepts_the_schema_accepts(schemas: dict[str, dict]) -> None:
    """Every example suite the loader takes validates against the schema: an editor never flags a good file."""
    from tamesu.errors import ConfigError
    from tamesu.plan import load_plan

    suites = [p for p in ROOT.glob("examples/**/*.yaml") if p.name != "tamesu.yaml" and "tamesu-runs" not in p.parts
              and "tests:" in p.read_text()]
    checked = 0
    for path in suites:
        try:
            load_plan([path], require_secrets=False)
        except ConfigError:
            continue  # an example someone is still writing; the loader's verdict is the one that counts
        assert _errors(schemas["suite"], load_yaml(path).data) == [], path
        checked += 1
    assert checked >= 1  # at least the rest-shop example
    for path in ROOT.glob("examples/**/tamesu.yaml"):
        assert _errors(schemas["project"], load_yaml(path).data) == [], path


def test_every_whole_yaml_block_of_the_docs_is_one_the_schema_accepts(schemas: dict[str, dict]) -> None:
    """The pages' blocks, which `tamesu validate` takes (tests/test_docs_snippets.py), are what a user pastes into an
    editor that reads the schema: none may be flagged there."""
    from test_docs_snippets import BLOCKS, FRAGMENT

    whole = [b for b in BLOCKS if b.lang == "yaml" and not b.body.startswith(FRAGMENT)]
    assert len(whole) > 25
    for block in whole:
        kind = "project" if block.body.startswith("# tamesu.yaml") else "suite"
        assert _errors(schemas[kind], parse_yaml(block.body, block.page, block.id).data) == [], block.id


def test_what_the_loader_rejects_the_schema_rejects(schemas: dict[str, dict]) -> None:
    suite = {
        "targets": {"bot": {"type": "rest", "url": "http://x", "colour": "red", "turn_timeout": "10s"}},
        "tests": [{"name": "t", "target": "bot", "persona": {"nmae": "x"},
                   "scenario": {"script": [{"say": "hi"}]},
                   "assert": [{"contains": "a"}, {"contain": "b"}, {"json_path": {"path": "$.a", "equals": 1},
                                                                     "on_turn": 0}]}],
    }
    errors = _errors(schemas["suite"], suite)
    assert any(e.startswith("targets/bot:") and "'colour'" in e for e in errors)
    assert any(e.startswith("tests/0/persona:") and "'nmae'" in e for e in errors)
    assert any(e.startswith("tests/0/assert/1:") for e in errors)
    assert any(e.startswith("tests/0/assert/2:") for e in errors)
    assert not any(e.startswith("tests/0/assert/0") for e in errors)  # `contains: "a"`, the shorthand
    assert len(errors) == 4, errors
    # durations and shorthands the loader accepts, the schema accepts
    fine = {"hooks": {"before_all": ["./seed.sh", {"http": {"url": "http://x"}, "timeout": "500ms"}]},
            "models": {"judge": "openai:gpt-4o"},
            "targets": {"m": {"type": "model", "system": "s", "turn_timeout": 30}},
            "tests": [{"name": "t", "target": "m", "timeout": "2m", "scenario": {"script": [{"say": "x"}]},
                       "assert": [{"status": "2xx"}, {"handoff": True}, {"turns": {"lte": 3}, "name": "short"}]}]}
    assert _errors(schemas["suite"], fine) == []
    assert _errors(schemas["project"], {"report": ["junit", "html:r.html"], "parallel": 4}) == []
    assert _errors(schemas["project"], {"paralel": 4}) != []


def test_x_keys_hold_anchors_the_file_merges_and_are_otherwise_ignored(schemas: dict[str, dict], tmp_path: Path,
                                                                       tamesu) -> None:
    # before: `x-agent: &agent` was "not a suite key", exit 2, as Compose users write their shared blocks
    (tmp_path / "tamesu.yaml").write_text("x-note: shared by hand\nparallel: 2\n")
    (tmp_path / "s.tamesu.yaml").write_text("""\
x-agent: &agent
  type: rest
  url: http://127.0.0.1:9/chat
  turn_timeout: 5s
targets:
  staging: { <<: *agent, url: "http://127.0.0.1:10/chat" }
  local: *agent
tests:
  - { name: hi, target: staging, scenario: { script: [ { say: hi } ] } }
  - { name: again, target: local, scenario: { script: [ { say: hi } ] } }
""")
    listed = tamesu(["list"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert listed.stdout.split() == ["s/hi", "->", "staging", "s/again", "->", "local"], listed.stdout
    for kind, name in (("suite", "s.tamesu.yaml"), ("project", "tamesu.yaml")):
        assert _errors(schemas[kind], load_yaml(tmp_path / name).data) == [], kind
    # only `x-`: any other key the file does not know is still a typo, for the loader and the editor alike
    (tmp_path / "s.tamesu.yaml").write_text((tmp_path / "s.tamesu.yaml").read_text().replace("x-agent", "xagent"))
    refused = tamesu(["validate"], cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.startswith("s.tamesu.yaml:1:1: xagent: not a suite key"), refused.stderr
    assert _errors(schemas["suite"], load_yaml(tmp_path / "s.tamesu.yaml").data) == \
        [": 'xagent' does not match any of the regexes: '^x-'"]


def test_init_points_editors_at_schemas_that_exist(tmp_path: Path, tamesu) -> None:
    made = tamesu(["init"], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    for name, kind in (("tamesu.yaml", "project"), ("suites/first.yaml", "suite")):
        path = tmp_path / name
        first = path.read_text().splitlines()[0]
        match = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
        assert match, first
        schema_path = (path.parent / match.group(1)).resolve()
        schema = json.loads(schema_path.read_text())
        assert schema["title"].startswith(f"tamesu {kind}")
        assert _errors(schema, load_yaml(path).data) == []
    written = tamesu(["schema", "--write", "elsewhere"], cwd=tmp_path)
    assert written.returncode == 0
    assert (tmp_path / "elsewhere" / "suite.schema.json").read_text() == \
        (tmp_path / ".tamesu" / "schema" / "suite.schema.json").read_text()


def test_a_persona_may_name_a_caller_pack_and_the_schema_lists_them(schemas: dict[str, dict]) -> None:
    """`behaviors: noisy_cafe` and `behaviors: {pack: fast_talker, volume_db: -10}` pass as the loader takes
    them; a pack that does not exist is flagged, in either form, as the loader rejects it."""
    from tamesu.suite.caller_packs import PACKS

    def suite(behaviors: object) -> dict:
        return {"targets": {"bot": {"type": "rest", "url": "http://x"}},
                "tests": [{"name": "t", "target": "bot", "persona": {"behaviors": behaviors},
                           "scenario": {"script": [{"say": "hi"}]}}]}

    packs = schemas["suite"]["$defs"]["Behaviors"]["anyOf"]
    assert {"enum": list(PACKS), "description": "a caller pack"} in packs
    for name in PACKS:
        assert _errors(schemas["suite"], suite(name)) == [], name
    assert _errors(schemas["suite"], suite({"pack": "fast_talker", "volume_db": -10})) == []
    assert _errors(schemas["suite"], suite({"speaking_rate": 1.2})) == []
    for wrong in ("noisy_kafe", {"pack": "noisy_kafe"}, 3):
        errors = _errors(schemas["suite"], suite(wrong))
        assert len(errors) == 1 and errors[0].startswith("tests/0/persona"), (wrong, errors)


def test_a_suite_of_one_target_lets_its_tests_leave_it_out(schemas: dict[str, dict], tmp_path: Path, tamesu) -> None:
    # before: "tests[0].target: missing required key", exit 2, in a suite that has one agent to talk to
    one = "targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
    tests = "tests:\n  - { name: hi, scenario: { script: [ { say: hi } ] } }\n"
    (tmp_path / "s.tamesu.yaml").write_text(one + tests)
    listed = tamesu(["list"], cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.split() == ["s/hi", "->", "bot"], listed.stdout + listed.stderr
    assert _errors(schemas["suite"], load_yaml(tmp_path / "s.tamesu.yaml").data) == []
    # with two, the test must say which
    (tmp_path / "s.tamesu.yaml").write_text(one + "  other: { type: rest, url: 'http://127.0.0.1:9/x' }\n" + tests)
    refused = tamesu(["validate"], cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith("s.tamesu.yaml:5:5: tests[0].target: missing "
                                                                 "required key"), refused.stderr


def test_the_schema_refuses_what_the_loader_refuses_for_suites_report_and_counts(schemas: dict[str, dict],
                                                                                 tmp_path: Path, tamesu) -> None:
    # before: `suites: 5`, a glob alone, `[]`, `report: 5` and `turns: {equals: "x"}` passed the editor's schema,
    # and `tamesu validate` refused each
    project, suite = schemas["project"], schemas["suite"]
    for wrong in (5, "suites/*.yaml", [5], [""], None):
        assert _errors(project, {"suites": wrong}) != [], wrong
        (tmp_path / "tamesu.yaml").write_text(json.dumps({"suites": wrong}))
        assert tamesu(["validate"], cwd=tmp_path).returncode == 2, wrong
    assert _errors(project, {"suites": ["suites/*.yaml", "more/*.yaml"]}) == []
    assert _errors(project, {"suites": []}) == []  # no suites of its own: test_a_project_with_no_suites_of_its_own
    for wrong in (5, None, [5]):
        assert _errors(project, {"report": wrong}) != [], wrong
    for fine in ("html,junit", ["html"], {"formats": ["html"], "tolerance": 0.1}):
        assert _errors(project, {"report": fine}) == [], fine

    def asserting(entry: dict) -> dict:
        return {"targets": {"bot": {"type": "rest", "url": "http://x"}},
                "tests": [{"name": "t", "target": "bot", "scenario": {"script": [{"say": "hi"}]}, "assert": [entry]}]}

    for entry in ({"turns": {"equals": "x"}}, {"turns": {"lte": [1]}}, {"metric": {"name": "m", "equals": "x"}}):
        assert _errors(suite, asserting(entry)) != [], entry
    assert _errors(suite, asserting({"turns": {"lte": 4}})) == []


def test_a_project_with_no_suites_of_its_own_is_what_the_schema_and_the_loader_both_take(schemas: dict[str, dict],
                                                                                       tmp_path: Path,
                                                                                       tamesu) -> None:
    # before: the editor's schema refused `suites: []` (minItems 1), which every command given paths, and
    # `tamesu test` in a JSONL-only project (tests/fixtures/design/tamesu.yaml), takes as written
    project = "suites: []\ntargets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
    (tmp_path / "tamesu.yaml").write_text(project)
    assert _errors(schemas["project"], load_yaml(tmp_path / "tamesu.yaml").data) == []
    (tmp_path / "s.yaml").write_text("targets:\n  api: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
                                     "tests:\n  - { name: a, target: api, scenario: { script: [ { say: hi } ] } }\n")
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    for command in (["validate", "s.yaml"], ["list", "s.yaml"], ["validate", "cases.jsonl", "-n", "bot"],
                    ["test", "-i", "cases.jsonl", "-n", "bot", "--dry-run"]):
        done = tamesu(command, cwd=tmp_path)
        assert done.returncode == 0, (command, done.stdout + done.stderr)
    # given nothing to load, the list names none: said where it is
    done = tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("tamesu.yaml:1:9: suites: the list is empty"), done.stderr


def test_a_hook_written_as_its_command_alone_is_one_the_schema_takes(schemas: dict[str, dict]) -> None:
    # `- "echo hi"` is `- { run: "echo hi" }` to the loader: an editor must not flag it (a hook's validators were
    # once all made one that wraps the rest, and the schema lost the string)
    suite = {"hooks": {"before_all": ["echo hi", {"run": "echo hi"}]},
             "targets": {"bot": {"type": "model", "model": "bot"}},
             "tests": [{"name": "t", "scenario": {"script": [{"say": "hi"}]}}]}
    assert _errors(schemas["suite"], suite) == []
    assert _errors(schemas["suite"], {**suite, "hooks": {"before_all": [{"runn": "echo hi"}]}}) != []


def test_an_assertions_boolean_is_true_or_false_in_the_schema_as_in_the_loader(schemas: dict[str, dict]) -> None:
    # the loader refuses `ignore_case: "yes"` (tests/checks/test_strict_options.py): an editor that took it was wrong
    suite = {"targets": {"bot": {"type": "rest", "url": "http://127.0.0.1:9/chat"}},
             "tests": [{"name": "t", "scenario": {"script": [{"say": "hi"}]},
                        "assert": [{"contains": {"value": "x", "ignore_case": "yes"}}]}]}
    assert [e.split(":")[0] for e in _errors(schemas["suite"], suite)] != [], "ignore_case: yes was taken"
    suite["tests"][0]["assert"] = [{"contains": {"value": "x", "ignore_case": True}}]
    assert _errors(schemas["suite"], suite) == []
