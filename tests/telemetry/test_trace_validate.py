"""What `tamesu validate` and the run say about `traces:` before any span arrives: `{{env.NAME}}` in
`traces.receive` (filled in when the run starts, one line when it cannot be), and a judge told to read a trace
that no `traces:` receives (a warning at its file:line:col)."""

from __future__ import annotations

import json
import re
from pathlib import Path

SUITE = """\
targets:
  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }
tests:
  - name: one
    target: bot
    scenario: { script: [ { say: hi } ] }
    assert:
      - contains: hi
      - { name: traced, judge: { rubric: "looked it up", trace: true } }
      - judge: { rubric: "polite" }
"""


def test_an_env_template_in_traces_receive(tmp_path: Path, tamesu, serve) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n"
                                          "traces: { receive: '127.0.0.1:{{env.MY_OTLP_PORT}}', wait: 0s }\n")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }
tests:
  - { name: one, target: bot, scenario: { script: [ { say: hi } ] } }
""")
    assert tamesu(["validate"], cwd=tmp_path).returncode == 0
    unset = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"MY_OTLP_PORT": ""})
    assert unset.returncode == 3, unset.stdout + unset.stderr
    assert "traces.receive '127.0.0.1:{{env.MY_OTLP_PORT}}': expected host:port, got '127.0.0.1:'" \
        in unset.stdout + unset.stderr
    assert "Traceback" not in unset.stderr
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n"
                                          "traces: { receive: '127.0.0.1:{{secrets.PORT}}' }\n")
    bad = tamesu(["validate"], cwd=tmp_path)
    assert bad.returncode == 2
    assert "tamesu.yaml:2:" in bad.stdout + bad.stderr
    assert "only {{env.NAME}} templates are filled in here, not {{secrets.PORT}}" in bad.stdout + bad.stderr


def test_a_judge_that_reads_the_trace_without_traces_is_a_warning(tmp_path: Path, tamesu) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\nmodels: { judge: { provider: fake, rules: [] } }\n")
    (tmp_path / "suite.yaml").write_text(SUITE)
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if "trace" in line]
    assert len(said) == 1, result.stderr
    assert re.fullmatch(r"warning: suite\.yaml:9:\d+: tests\[0\]\.assert\[1\]\.judge\.trace: judge trace: true, "
                        r"but no `traces:` receives the agent's spans \(tamesu\.yaml or the suite\): the judge sees "
                        r"no trace", said[0]), said[0]
    # with `traces:` in the project, or in the suite itself, nothing is said
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\ntraces: { receive: '127.0.0.1:0' }\n"
                                          "models: { judge: { provider: fake, rules: [] } }\n")
    assert "trace" not in tamesu(["validate"], cwd=tmp_path).stderr
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\nmodels: { judge: { provider: fake, rules: [] } }\n")
    (tmp_path / "suite.yaml").write_text("traces: { receive: '127.0.0.1:0' }\n" + SUITE)
    quiet = tamesu(["validate"], cwd=tmp_path)
    assert quiet.returncode == 0 and "trace" not in quiet.stderr, quiet.stderr


def test_a_default_judge_that_reads_the_trace_without_traces_is_a_warning(tmp_path: Path, tamesu) -> None:
    """`defaults.assert` of the suite and of tamesu.yaml: each judge with trace: true said once, where it is."""
    (tmp_path / "tamesu.yaml").write_text("""\
suites: ['a.yaml', 'b.yaml']
models: { judge: { provider: fake, rules: [] } }
defaults:
  assert:
    - judge: { rubric: "polite" }
    - judge: { rubric: "looked it up", trace: true }
""")
    suite = """\
targets:
  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }
defaults:
  assert:
    - contains: hi
    - { name: traced, judge: { rubric: "used a tool", trace: true } }
tests:
  - { name: one, target: bot, scenario: { script: [ { say: hi } ] } }
"""
    (tmp_path / "a.yaml").write_text(suite)
    (tmp_path / "b.yaml").write_text(suite)
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    said = sorted(line for line in result.stderr.splitlines() if "trace: true" in line)
    ending = (r"judge trace: true, but no `traces:` receives the agent's spans \(tamesu\.yaml or the suite\): "
              r"the judge sees no trace")
    assert len(said) == 3, result.stderr
    assert re.fullmatch(rf"warning: a\.yaml:6:\d+: defaults\.assert\[1\]\.judge\.trace: {ending}", said[0]), said
    assert re.fullmatch(rf"warning: b\.yaml:6:\d+: defaults\.assert\[1\]\.judge\.trace: {ending}", said[1]), said
    assert re.fullmatch(rf"warning: tamesu\.yaml:6:\d+: defaults\.assert\[1\]\.judge\.trace: {ending}", said[2]), \
        said
    # `traces:` in one suite silences its own defaults only; in the project, all of them
    (tmp_path / "a.yaml").write_text(suite + "traces: { query: { jaeger: 'http://127.0.0.1:16686' } }\n")
    again = [line for line in tamesu(["validate"], cwd=tmp_path).stderr.splitlines() if "trace: true" in line]
    assert len(again) == 2 and not any("a.yaml" in line for line in again), again
    (tmp_path / "tamesu.yaml").write_text((tmp_path / "tamesu.yaml").read_text()
                                          + "traces: { receive: '127.0.0.1:0' }\n")
    assert "trace: true" not in tamesu(["validate"], cwd=tmp_path).stderr


UNTRACED = """\
targets:
  bot: {{ type: rest, url: '{url}/chat' }}
tests:
  - name: spans
    target: bot
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert:
      - contains: hello
      - span: {{ name: tool }}
      - metric: {{ name: trace_spans_total, equals: 0 }}
  - name: late turn
    target: bot
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert:
      - {{ contains: hello, on_turn: 3 }}
      - span: {{ name: tool, on_turn: 2 }}
"""


def _hello() -> object:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": "hello"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def test_spans_without_traces_and_a_turn_past_the_script_are_the_suites_not_the_agents(
        tmp_path: Path, tamesu, serve) -> None:
    # before: validate said ok, and the run failed them with "fault: agent" (exit 1): the agent was blamed for
    # spans no receiver could get and for a turn the script never makes
    import json

    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(UNTRACED.format(url=serve(_hello()).url))
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    said = (checked.stdout + checked.stderr).splitlines()
    assert "warning: suite.yaml:9:15: tests[0].assert[1].span: span reads the agent's spans, but no `traces:` " \
           "receives them (tamesu.yaml or the suite): every run of the test is an error" in said, said
    assert any(line.startswith("warning: suite.yaml:10:17: tests[0].assert[2].metric: metric trace_spans_total is "
                               "measured from the agent's spans") for line in said), said
    assert "warning: suite.yaml:15:37: tests[1].assert[0].on_turn: on_turn 3 is past the script, which makes 1 " \
           "turn: every run of the test is an error" in said, said
    assert "warning: suite.yaml:16:38: tests[1].assert[1].span.on_turn: on_turn 2 is past the script, which " \
           "makes 1 turn: every run of the test is an error" in said, said
    ran = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "fault: agent" not in ran.stdout, ran.stdout
    [run_dir] = list((tmp_path / "out").iterdir())
    lines = {json.loads(x)["test"]: json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()}
    [spans] = lines["spans"]["runs"]
    assert (spans["status"], spans["fault"]) == ("error", "suite"), spans
    assert spans["error"] == ("span: no spans: the suite receives none (set traces.receive in tamesu.yaml or "
                              "the suite)"), spans
    [late] = lines["late turn"]["runs"]
    assert (late["status"], late["error"]) == ("error", "contains: on_turn 3 is past the script, which makes 1 "
                                                         "turn"), late
    # each result is shown beside its turn (`contains (turn 3)`, HTML's `turn 3`): its reason says it once;
    # a span's own on_turn is not beside it, and is named (before: `not decided: on_turn 3 is past ...`)
    result = json.loads((run_dir / late["dir"] / "result.json").read_text())
    assert [(a["name"], a["on_turn"], a["reason"]) for a in result["assertions"]] == [
        ("contains", 3, "not decided: past the script, which makes 1 turn"),
        ("span", None, "not decided: on_turn 2 is past the script, which makes 1 turn")], result["assertions"]


def test_a_default_span_assertion_without_traces_is_warned_where_written(tmp_path: Path, tamesu) -> None:
    # before: the warning above covered a test's own assertions; one in defaults.assert (the suite's or
    # tamesu.yaml's) made every run of every test an error with no word at validate
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\ndefaults:\n  assert:\n"
                                          "    - metric: { name: trace_spans_total, gte: 1 }\n")
    (tmp_path / "suite.yaml").write_text("targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
                                         "defaults:\n  assert:\n    - span: { name: tool }\n"
                                         "tests:\n  - { name: a, target: bot, scenario: { script: [ { say: hi } ] } }"
                                         "\n")
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    said = (checked.stdout + checked.stderr).splitlines()
    assert any(line.startswith("warning: suite.yaml:5:13: defaults.assert[0].span: span reads the agent's spans")
               for line in said), said
    assert any(line.startswith("warning: tamesu.yaml:4:15: defaults.assert[0].metric: metric trace_spans_total is "
                               "measured from the agent's spans") for line in said), said


def test_a_url_in_traces_receive_is_refused_where_written(tmp_path: Path, tamesu) -> None:
    # before: validate said ok (the host read as `http://127.0.0.1`) and the run failed each test with
    # "traces.receive: cannot listen on http://127.0.0.1:4318: Name or service not known" (exit 3)
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n"
                                          "traces: { receive: 'http://127.0.0.1:4318' }\n")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }
tests:
  - { name: one, target: bot, scenario: { script: [ { say: hi } ] } }
""")
    for command in (["validate"], ["run", "--out", "out"]):
        done = tamesu(command, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.splitlines()[0] == (
            "tamesu.yaml:2:20: traces.receive: expected host:port, got the URL 'http://127.0.0.1:4318': give "
            "host:port only ('127.0.0.1:4318')"), done.stderr


def test_a_judge_that_reads_no_trace_is_the_suites_error_and_every_check_is_said(tmp_path: Path, tamesu,
                                                                                  serve) -> None:
    # before: the judge's "no spans" was a model's error, so the run was the environment's (exit 3, where a `span`
    # check's same problem is the suite's, exit 2) and `retries` ran the conversation again for nothing; the
    # console left the `span` check's line out, taking it for the error's echo (its words end the judge's)
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    asked: list[str] = []

    async def chat(request: Request) -> JSONResponse:
        asked.append((await request.json())["message"])
        return JSONResponse({"text": "hi"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\nmodels: { judge: { provider: fake, rules: [] } }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{url}/chat' }}
tests:
  - name: one
    target: bot
    retries: 2
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert:
      - {{ name: traced, judge: {{ rubric: "looked it up", trace: true }} }}
      - {{ name: tools, span: {{ name: 'execute_tool .*' }} }}
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert asked == ["hi"]  # the suite's own mistake comes out the same again: not retried
    detail = json.loads(next((tmp_path / "out").glob("*/suite/one/run-1/result.json")).read_text())
    assert detail["status"] == "error" and detail["fault"] == "suite", detail
    # the judge's own words follow the name the suite gave it (not "traced: judge: ...")
    assert detail["error"] == ("traced: trace: true, but no spans: the suite receives none (set traces.receive "
                               "in tamesu.yaml or the suite)")
    said = result.stdout
    assert "! traced: trace: true, but no spans" in said, said
    assert "✗ tools: not decided: no spans: the suite receives none" in said, said
