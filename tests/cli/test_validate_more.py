"""`tamesu validate` beyond the schema: JSONL files checked as `tamesu test` loads them, tool assertions on A2A
targets (a warning), script `files:` that do not exist (a suite error, for `run` too), an unset secret in a
remote agent's `token` (a warning)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROJECT = """\
suites: [suite.yaml]
targets:
  shop: { type: a2a, url: "http://127.0.0.1:9" }
  desk: { type: rest, url: "http://127.0.0.1:9/chat", request: { body: { message: "{{message}}" } } }
"""

CASES = "".join(json.dumps(case) + "\n" for case in [
    {"id": "tools", "input": "Where is ORD-1?",
     "assertions": [{"type": "tool_called", "name": "lookup_order"}, {"type": "contains", "value": "ORD-1"}]},
    {"id": "photo", "input": [{"role": "user", "content": [{"type": "text", "text": "This one"},
                                                           {"type": "image", "source": "file://photo.png"}]}]},
])

SUITE = """\
remote_agents:
  billing: { skills: [refund], token: "{{secrets.BILLING_TOKEN_UNSET}}" }
targets:
  shop: { type: a2a, url: "http://127.0.0.1:9", metadata: { billing: "{{remote.billing.url}}" } }
tests:
  - name: delegates
    target: shop
    scenario: { script: [{ say: "refund ORD-1", files: [receipt.png] }] }
    assert:
      - tool_not_called: billing
      - tool_called: lookup_order
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "tamesu.yaml").write_text(PROJECT)
    (tmp_path / "cases.jsonl").write_text(CASES)
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "suite.yaml").write_text(SUITE)
    return tmp_path


def test_jsonl_files_are_validated_against_the_agent_they_test(tmp_path: Path, tamesu: Callable[..., Any]) -> None:
    project = _project(tmp_path)
    on_a2a = tamesu(["validate", "cases.jsonl", "-n", "shop"], cwd=project)
    assert on_a2a.returncode == 0, on_a2a.stdout + on_a2a.stderr
    assert on_a2a.stdout.strip() == "ok: 2 test case(s) in 1 JSONL file(s) for shop (a2a)"
    assert on_a2a.stderr.splitlines() == [
        "warning: cases.jsonl:1:60: assertions[0]: an A2A agent reports no tool calls, so this assertion can never "
        "see lookup_order (only the suite's remote agents, none declared, count as calls; with `traces:`, the agent's "
        "execute_tool spans do): every run of the test is an error"]
    # `tamesu test` says the same when it loads the cases
    dry = tamesu(["test", "-i", "cases.jsonl", "-n", "shop", "--dry-run"], cwd=project)
    assert dry.returncode == 0 and dry.stderr.splitlines() == on_a2a.stderr.splitlines()
    on_rest = tamesu(["validate", "cases.jsonl", "-n", "desk"], cwd=project)
    assert on_rest.returncode == 2
    assert on_rest.stderr.splitlines() == [
        "cases.jsonl:2:122: input[0].content[1].source: the agent under test (desk (rest)) cannot get this file: "
        "photo.png: this rest target's request.body does not send files: add \"{{attachments}}\" to it, or set "
        "request.multipart", "1 problem found"]
    (project / "bad.jsonl").write_text(json.dumps({"id": "x", "type": "single_turn",
                                                   "turns": [{"input": "a"}, {"input": "b"}]}) + "\n")
    both = tamesu(["validate", "bad.jsonl", "cases.jsonl"], cwd=project)
    assert both.returncode == 2
    assert both.stderr.splitlines()[-2:] == [
        "bad.jsonl:1:62: turns[1]: a single_turn case has one turn, not 2 (drop type: single_turn to play them in "
        "order)", "1 problem found"]


def test_suite_files_tokens_and_a2a_tool_assertions(tmp_path: Path, tamesu: Callable[..., Any]) -> None:
    project = _project(tmp_path)
    missing = tamesu(["validate", "suite.yaml"], cwd=project)
    assert missing.returncode == 2
    # the suite's warnings are said with its problem
    lines = missing.stderr.splitlines()
    assert lines[0].startswith("warning: suite.yaml:2:39: remote_agents.billing.token: secret BILLING_TOKEN_UNSET")
    assert next(line for line in lines if not line.startswith("warning: ")) == (
        "suite.yaml:8:57: tests[0].scenario.script[0].files[0]: file not found: receipt.png (a path is relative to "
        "the suite's folder)")
    assert tamesu(["run", "suite.yaml", "--out", "out"], cwd=project).returncode == 2  # nothing runs
    (project / "receipt.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    done = tamesu(["validate", "suite.yaml"], cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    # billing is a remote agent: its delegations are calls, so only lookup_order is warned about
    assert done.stderr.splitlines() == [
        "warning: suite.yaml:2:39: remote_agents.billing.token: secret BILLING_TOKEN_UNSET is not set (environment "
        "or .env): the remote agent cannot start",
        "warning: suite.yaml:11:9: tests[0].assert[1]: an A2A agent reports no tool calls, so this assertion can "
        "never see lookup_order (only the suite's remote agents, billing, count as calls; with `traces:`, the agent's "
        "execute_tool spans do): every run of the test is an error"]


def test_a2a_tool_assertions_with_traces_are_quiet_in_jsonl_as_in_yaml(tmp_path: Path,
                                                                      tamesu: Callable[..., Any]) -> None:
    # before: with `traces:`, whose execute_tool spans are the agent's tool calls, a suite's tool assertion on an
    # A2A target was taken quietly and graded, while a JSONL case's was still warned it "can never see one"
    project = _project(tmp_path)
    (project / "receipt.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (project / "tamesu.yaml").write_text(PROJECT + 'traces: { receive: "127.0.0.1:0" }\n')
    on_a2a = tamesu(["validate", "cases.jsonl", "-n", "shop"], cwd=project)
    assert (on_a2a.returncode, on_a2a.stderr) == (0, ""), on_a2a.stdout + on_a2a.stderr
    suite = tamesu(["validate", "suite.yaml"], cwd=project)
    assert suite.returncode == 0, suite.stdout + suite.stderr
    assert "tool calls" not in suite.stderr, suite.stderr


def test_a_suite_file_its_rest_target_would_not_send_is_a_problem(tmp_path: Path, tamesu: Callable[..., Any]) -> None:
    project = _project(tmp_path)
    (project / "receipt.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (project / "desk.yaml").write_text("""\
targets:
  desk: { type: rest, url: "http://127.0.0.1:9/chat", request: { body: { message: "{{message}}" } } }
  form: { type: rest, url: "http://127.0.0.1:9/chat", request: { multipart: true } }
tests:
  - { name: dropped, target: desk, scenario: { script: [{ say: here, files: [receipt.png] }] } }
  - { name: sent, target: form, scenario: { script: [{ say: here, files: [receipt.png] }] } }
""")
    done = tamesu(["validate", "desk.yaml"], cwd=project)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "desk.yaml:5:78: tests[0].scenario.script[0].files[0]: target desk cannot send this file: receipt.png: this "
        "rest target's request.body does not send files: add \"{{attachments}}\" to it, or set request.multipart",
        "1 problem found"]


def test_a_suite_file_a_get_target_would_not_send_is_a_problem(tmp_path: Path, tamesu: Callable[..., Any]) -> None:
    # a GET sends no default body (the words go in the url): the file went nowhere, and the run passed
    project = _project(tmp_path)
    (project / "receipt.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (project / "ask.yaml").write_text("""\
targets:
  ask: { type: rest, method: GET, url: "http://127.0.0.1:9/ask?q={{message}}" }
  ws: { type: rest, method: GET, url: "ws://127.0.0.1:9/ws", streaming: websocket }
tests:
  - { name: dropped, target: ask, scenario: { script: [{ say: here, files: [receipt.png] }] } }
  - { name: sent, target: ws, scenario: { script: [{ say: here, files: [receipt.png] }] } }
""")
    done = tamesu(["validate", "ask.yaml"], cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "ask.yaml:5:77: tests[0].scenario.script[0].files[0]: target ask cannot send this file: receipt.png: a GET "
        "request of this rest target has no body to carry it: set request.body (with \"{{attachments}}\") or "
        "request.multipart, or a method that sends a body (POST)",
        "1 problem found"]


def test_a_rest_method_no_server_takes_is_a_problem_where_written(tmp_path: Path,
                                                                  tamesu: Callable[..., Any]) -> None:
    # was each run's `internal error: ValueError: Method cannot contain non-token characters` (session.open's
    # method was checked, the target's and the poll's were not)
    project = _project(tmp_path)
    (project / "m.yaml").write_text("""\
targets:
  send: { type: rest, url: "http://127.0.0.1:9/chat", method: "GE T" }
  poll: { type: rest, url: "http://127.0.0.1:9/jobs", response: { poll: { url: /jobs/1, method: "get job" } } }
tests:
  - { name: send, target: send, scenario: { script: [{ say: here }] } }
  - { name: poll, target: poll, scenario: { script: [{ say: here }] } }
""")
    done = tamesu(["validate", "m.yaml"], cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "m.yaml:2:63: targets.send.method: expected an HTTP method such as GET or POST, got 'GE T'",
        "m.yaml:3:97: targets.poll.response.poll.method: expected an HTTP method such as GET or POST, got 'get job'",
        "2 problems found"]


def test_a_rest_template_of_a_mode_the_target_does_not_use_is_a_problem(tmp_path: Path,
                                                                         tamesu: Callable[..., Any]) -> None:
    # `{{listen.url}}` without response.listen, `{{response.job}}` outside response.poll: validate said ok, and
    # every run was an error at its first turn ("the request could not be written: ... is not available here")
    project = _project(tmp_path)
    (project / "r.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/bot", request: { body: { callback: "{{listen.url}}" } } }
  job: { type: rest, url: "http://127.0.0.1:9/jobs", headers: { X-Job: "{{response.job}}" } }
  poll:
    type: rest
    url: "http://127.0.0.1:9/jobs"
    response: { poll: { url: "/jobs/{{response.job}}" } }
tests:
  - { name: bot, target: bot, scenario: { script: [{ say: here }] } }
  - { name: job, target: job, scenario: { script: [{ say: here }] } }
  - { name: poll, target: poll, scenario: { script: [{ say: here }] } }
""")
    done = tamesu(["validate", "r.yaml"], cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "r.yaml:2:82: targets.bot.request.body.callback: bad template {{listen.url}}: the address of the listener "
        "response.listen serves, and this target has no response.listen",
        "r.yaml:3:72: targets.job.headers.X-Job: bad template {{response.job}}: the send's answer, which only "
        "response.poll's url, method, headers and body read",
        "2 problems found"]


def test_a_folder_of_jsonl_files_and_one_the_project_names(tmp_path: Path, tamesu: Callable[..., Any]) -> None:
    project = _project(tmp_path)
    folder = project / "cases"
    folder.mkdir()
    (folder / "a.jsonl").write_text(CASES)
    (folder / "b.ndjson").write_text(json.dumps({"id": "ok", "input": "hi"}) + "\n"
                                     + json.dumps({"id": "bad", "input": "hi", "max_turns": -1}) + "\n")
    (folder / "c.jsonl").write_text('{"id": "c", "input": "hi"\n')
    (folder / "notes.txt").write_text("not a case")
    # every file of the folder, each problem as file:line:col, exit 2
    bad = tamesu(["validate", "cases", "-n", "shop"], cwd=project)
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "cases/b.ndjson:2:43: max_turns: input should be greater than or equal to 1, got -1",
        "cases/c.jsonl:1:26: not valid JSON: Expecting ',' delimiter (the file ends before the value does)",
        "2 problems found"]
    (folder / "c.jsonl").unlink()
    (folder / "b.ndjson").write_text(json.dumps({"id": "ok", "input": "hi"}) + "\n")
    good = tamesu(["validate", "cases", "-n", "shop"], cwd=project)
    assert good.returncode == 0, good.stdout + good.stderr  # a warning is not a failure
    assert good.stdout.strip() == "ok: 3 test case(s) in 2 JSONL file(s) for shop (a2a)"
    assert good.stderr.splitlines() == [
        "warning: cases/a.jsonl:1:60: assertions[0]: an A2A agent reports no tool calls, so this assertion can never "
        "see lookup_order (only the suite's remote agents, none declared, count as calls; with `traces:`, the agent's "
        "execute_tool spans do): every run of the test is an error"]
    # `tamesu test` reads a folder's JSONL files too (never sends its name to the agent as a message)
    run = tamesu(["test", "-i", "cases", "-n", "shop", "--dry-run"], cwd=project)
    assert run.returncode == 0, run.stderr
    assert "Input: cases (3 test cases), not run (--dry-run)" in run.stdout, run.stdout
    # named by the project's `suites` (a folder, and a pattern): `tamesu validate` reads them as JSONL, the YAML
    # suite beside them as a suite, and says every problem of both at once
    (project / "tamesu.yaml").write_text(PROJECT.replace("suites: [suite.yaml]",
                                                         "suites: [suite.yaml, cases, 'more/*.jsonl']"))
    (project / "more").mkdir()
    (project / "more" / "c.jsonl").write_text('{"id": "c", "input": "hi", "assertions": [{"type": "nope"}]}\n')
    both = tamesu(["validate"], cwd=project)
    assert both.returncode == 2
    assert [line for line in both.stderr.splitlines() if not line.startswith("warning: ")] == [
        "more/c.jsonl:1:52: assertions[0].type: unknown assertion type 'nope' (one of contains, equals, regex, "
        "json_path, tool_called, type, agent, script)",
        f"suite.yaml:8:57: tests[0].scenario.script[0].files[0]: file not found: {project / 'receipt.png'} (a path "
        "is relative to the suite's folder)", "2 problems found"]
    (project / "more" / "c.jsonl").write_text('{"id": "c", "input": "hi"}\n')
    (project / "receipt.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    done = tamesu(["validate", "."], cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["ok: 4 test case(s) in 3 JSONL file(s)", "ok: 1 test in 1 suite"]
    # `tamesu run` reads the YAML suite and says what the JSONL entries are; with only those, it has nothing to run
    listed = tamesu(["list"], cwd=project)
    assert listed.returncode == 0 and listed.stdout.split()[0] == "suite/delegates", listed.stdout + listed.stderr
    (project / "tamesu.yaml").write_text(PROJECT.replace("suites: [suite.yaml]", "suites: [cases, 'more/*.jsonl']"))
    none = tamesu(["run", "--out", "out"], cwd=project)
    assert none.returncode == 2
    assert none.stderr.splitlines() == [
        "cases:1:1: JSONL test cases, not a suite: `tamesu test -i FILE -n TARGET` runs them, `tamesu validate` "
        "checks them",
        "more/c.jsonl:1:1: JSONL test cases, not a suite: `tamesu test -i more/c.jsonl -n TARGET` runs them, "
        "`tamesu validate` checks them", "2 problems found"]


def test_the_expense_examples_jsonl_folder_validates(tamesu: Callable[..., Any]) -> None:
    example = Path(__file__).parents[2] / "examples" / "expense-agent"
    done = tamesu(["validate"], cwd=example, env={"EXPENSE_URL": "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["ok: 11 test case(s) in 4 JSONL file(s)"]


def test_a_forwarded_header_naming_an_unset_secret_is_a_warning(tmp_path: Path, tamesu: Callable[..., Any]) -> None:
    (tmp_path / "suite.yaml").write_text("""\
remote_agents:
  billing:
    forward: "http://127.0.0.1:9/a2a"
    headers: { Authorization: "Bearer {{secrets.REAL_BILLING_KEY_UNSET}}", X-Team: "{{env.TEAM_UNSET_VAR}}" }
targets:
  shop: { type: a2a, url: "http://127.0.0.1:9", metadata: { billing: "{{remote.billing.url}}" } }
tests:
  - { name: t, target: shop, scenario: { script: [ { say: hi } ] } }
""")
    done = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "warning: suite.yaml:4:31: remote_agents.billing.headers.Authorization: secret REAL_BILLING_KEY_UNSET is not "
        "set (environment or .env): the remote agent cannot start",
        "warning: suite.yaml:4:84: remote_agents.billing.headers.X-Team: environment variable TEAM_UNSET_VAR is not "
        "set: the remote agent cannot start"]


def test_a_remote_agents_template_that_is_not_one_is_a_problem_where_written(tmp_path: Path,
                                                                             tamesu: Callable[..., Any]) -> None:
    # before: "ok", and the remote agent then required the literal "{{secrets.BILLING_KEY" as its token (the
    # orchestrator's calls refused, 401, exit 3)
    (tmp_path / "suite.yaml").write_text("""\
remote_agents:
  billing: { token: "{{secrets.BILLING_KEY" }
  shipping: { forward: "http://127.0.0.1:9/{{env.PATH_UNSET", headers: { X-Team: "{{team}}" } }
targets:
  shop: { type: a2a, url: "http://127.0.0.1:9", metadata: { at: "{{remote.billing.url}} {{remote.shipping.url}}" } }
tests:
  - { name: t, target: shop, scenario: { script: [ { say: hi } ] } }
""")
    done = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "suite.yaml:2:21: remote_agents.billing.token: bad template: '{{' without a matching '}}'",
        "suite.yaml:3:24: remote_agents.shipping.forward: bad template: '{{' without a matching '}}'",
        "suite.yaml:3:82: remote_agents.shipping.headers.X-Team: bad template {{team}}: unknown namespace 'team' "
        "(one of args, attachments, captured, env, listen, message, messages, remote, response, run, secrets, "
        "session, trace, ui_messages, vars)",
        "3 problems found"]


def test_a_model_without_a_price_under_a_dollar_budget_is_a_warning(tmp_path: Path,
                                                                     tamesu: Callable[..., Any]) -> None:
    # its calls counted as $0: `budget: {usd: 1}` could never stop a run on a model newer than the price table
    (tmp_path / "tamesu.yaml").write_text("""\
suites: [suite.yaml]
budget: { usd: 1.00 }
models:
  judge: { provider: openai, model: mistral-large-latest, fallback: "anthropic:claude-next" }
  simulator: openai:gpt-4o-mini-2024-07-18
  priced: { provider: openai, model: mistral-small, price: { input_per_mtok: 0.1, output_per_mtok: 0.3 } }
  local: { provider: openai, model: qwen3, base_url: "http://127.0.0.1:11434/v1" }
  rules: { provider: fake }
""")
    (tmp_path / "suite.yaml").write_text("""\
models:
  grader: anthropic:claude-sonnet-4-5
  critic: openai:o9-preview
targets:
  desk: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - { name: hello, target: desk, scenario: { script: [ { say: hi } ] } }
""")
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    unpriced = [line for line in lines if "no price known" in line]
    tail = ": its calls count as $0 against budget.usd, which cannot stop them (give the model price: " \
           "{input_per_mtok, output_per_mtok})"
    assert unpriced == [
        f"warning: tamesu.yaml:4:10: models.judge: no price known for openai:mistral-large-latest{tail}",
        f"warning: tamesu.yaml:4:69: models.judge.fallback: no price known for anthropic:claude-next{tail}",
        f"warning: suite.yaml:3:11: models.critic: no price known for openai:o9-preview{tail}"], lines
    # without a dollar budget, nothing to warn of
    (tmp_path / "tamesu.yaml").write_text((tmp_path / "tamesu.yaml").read_text().replace("budget: { usd: 1.00 }\n", ""))
    again = tamesu(["validate"], cwd=tmp_path)
    assert again.returncode == 0 and "no price known" not in again.stdout + again.stderr


def test_a2a_tool_assertions_are_not_warned_where_the_agents_spans_are_received(
        tmp_path: Path, tamesu: Callable[..., Any]) -> None:
    # with `traces:`, an A2A agent's execute_tool spans are its calls (tests/telemetry/test_trace_targets.py passes a
    # tool_called so): validate still said "can never see lookup_order"
    (tmp_path / "suite.yaml").write_text("""\
targets:
  shop: { type: a2a, url: "http://127.0.0.1:9/a2a" }
tests:
  - name: order
    scenario: { script: [ { say: "Where is ORD-1001?" } ] }
    assert:
      - tool_called: { name: lookup_order, args: { order_id: ORD-1001 } }
""")
    untraced = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert untraced.returncode == 0, untraced.stdout + untraced.stderr
    assert "an A2A agent reports no tool calls, so this assertion can never see lookup_order" in untraced.stderr
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\ntraces: { receive: '127.0.0.1:0' }\n")
    traced = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert "reports no tool calls" not in traced.stderr, traced.stderr
