"""Every way of reaching a REST agent, through the `tamesu` command: plain, SSE, websocket, poll, listen,
session.open, and an HTTP hook. Each checks the exit code, results.jsonl and result.json."""

from __future__ import annotations

import json
from pathlib import Path

from agents.fixtures import RunningAgents, rest_agents
from ports import refused_port

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest

SUITE = """\
targets:
  plain: {{ type: rest, url: "{url}/chat" }}
  sse:
    type: rest
    url: "{url}/sse"
    streaming: sse
  sniffed: {{ type: rest, url: "{url}/sse" }}
  raw: {{ type: rest, url: "{url}/sse", streaming: none }}
  ws:
    type: rest
    url: "{ws}"
    streaming: websocket
  poll:
    type: rest
    url: "{url}/jobs"
    response:
      poll: {{ url: "/jobs/{{{{response.job}}}}", interval: 20ms, done: {{ path: $.status, equals: done }} }}
  bot:
    type: rest
    url: "{url}/bot"
    request:
      body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}", session_id: "{{{{session}}}}" }}
    response:
      # the turn ends at the agent's last post; idle only bounds a post that never comes (300 ms of idle read
      # half the turn once on a loaded machine, where the agent's second post came later than that)
      listen: {{ path: /hook, idle: 5s, done: {{ path: $.text, equals: "Done: order pizza" }} }}
  conversation:
    type: rest
    url: "{url}/conversations/{{{{session.id}}}}/messages"
    headers: {{ Authorization: "Bearer {{{{session.token}}}}" }}
    session:
      open: {{ url: "{url}/conversations", capture: {{ id: $.id, token: $.token }} }}
    response: {{ text: $.reply.text }}
hooks:
  before_all:
    - http: {{ url: "{url}/chat", method: POST, body: {{ message: "warm up", session_id: hook }} }}
tests:
  - name: plain
    target: plain
    scenario: {{ script: [ {{ say: hello }}, {{ say: again }} ] }}
    assert:
      - contains: "Echo 2: again"
      - status: 200
      - json_path: {{ path: $.turn, equals: 1 }}
        on_turn: 1
  - name: sse
    target: sse
    scenario: {{ script: [ {{ say: "stream this" }} ] }}
    assert:
      - contains: "You said stream this"
      - metric: {{ name: time_to_first_token_ms, lte: 5000 }}
  - name: sse not said
    target: sniffed
    scenario: {{ script: [ {{ say: "stream this" }} ] }}
    assert:
      - contains: "You said stream this"
      - metric: {{ name: time_to_first_token_ms, lte: 5000 }}
  - name: sse refused
    target: raw
    scenario: {{ script: [ {{ say: "stream this" }} ] }}
    assert: [ {{ contains: "data: " }} ]
  - name: websocket
    target: ws
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
    assert:
      - regex: "You said one(.|\\n)*You said two"
      - json_path: {{ path: $.turn, equals: 2 }}
        on_turn: last
  - name: poll
    target: poll
    scenario: {{ script: [ {{ say: "long job" }} ] }}
    assert: [ {{ contains: "Processed: long job" }} ]
  - name: listen
    target: bot
    scenario: {{ script: [ {{ say: "order pizza" }} ] }}
    assert: [ {{ contains: "Working on: order pizza" }}, {{ contains: "Done: order pizza" }} ]
  - name: session open
    target: conversation
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert: [ {{ regex: "^\\\\[conv-[0-9]+\\\\] hi$" }} ]
"""


def test_every_rest_mode_through_the_command(tmp_path: Path, tamesu, rest_agents: RunningAgents) -> None:
    (tmp_path / "modes.yaml").write_text(SUITE.format(url=rest_agents.url, ws=rest_agents.ws_url))
    # with a proxy set for everything, as on a company's machine: no mode goes through it to reach this machine
    # (nothing listens there; the websocket and the hook's request read the environment in their own ways)
    nowhere = f"http://127.0.0.1:{refused_port()}"
    proxies = {name: nowhere for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")}
    result = tamesu(["run", "modes.yaml", "--out", "out", "--parallel", "3"], cwd=tmp_path, env=proxies)
    assert result.returncode == 0, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    parsed = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    lines = {line["test"]: line for line in parsed}
    assert set(lines) == {"plain", "sse", "sse not said", "sse refused", "websocket", "poll", "listen",
                          "session open"}
    assert {line["status"] for line in lines.values()} == {"passed"}

    def detail(test: str) -> dict:
        return json.loads((run_dir / lines[test]["runs"][0]["dir"] / "result.json").read_text())

    sse = detail("sse")
    turn = sse["turns"][0]["agent"]
    assert len(turn["raw"]) >= 3  # every streamed event is kept
    assert turn["sent_at_ms"] <= turn["first_token_at_ms"] <= turn["completed_at_ms"]
    assert sse["metrics"]["time_to_first_token_ms"] > 0
    # streaming not set: the answer's content type made it an event stream, said once; `none` said keeps the body
    sniffed = detail("sse not said")
    assert [e["name"] for e in sniffed["events"]].count("sse_detected") == 1
    assert len(sniffed["turns"][0]["agent"]["raw"]) >= 3
    assert "sse_detected" not in {e["name"] for e in detail("sse refused")["events"]}
    poll = detail("poll")["turns"][0]["agent"]
    assert poll["raw"][0]["job"] and poll["response"]["status"] == "done"
    assert len(poll["raw"]) >= 3  # the send, the pending polls, the answer
    listen = detail("listen")
    assert [post["text"] for post in listen["turns"][0]["agent"]["raw"]] == ["Working on: order pizza",
                                                                             "Done: order pizza"]
    opened = detail("session open")
    assert {"transport", "session_open"} <= {e["name"] for e in opened["events"]}
    assert "tok-" not in json.dumps(opened["events"])  # the captured token is a session value, not an event
    assert rest_agents.state.turns.get("hook") == 1  # the before_all HTTP hook reached the agent


def test_a_request_template_with_no_value_yet_is_the_runs_error_in_one_line(tmp_path: Path, tamesu,
                                                                           rest_agents: RunningAgents) -> None:
    """`{{captured.order}}` in the body before the agent said an order: it was `internal error: TemplateError`, a
    traceback for the test."""
    (tmp_path / "s.yaml").write_text(f"""\
targets:
  api:
    type: rest
    url: "{rest_agents.url}/chat"
    request: {{ body: {{ message: "{{{{message}}}} {{{{captured.order}}}}" }} }}
tests:
  - name: early
    target: api
    capture: [ {{ name: order, regex: "(ORD-[0-9]+)" }} ]
    retries: 2
    scenario: {{ script: [ {{ say: hi }} ] }}
""")
    result = tamesu(["run", "s.yaml", "--out", "out"], cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 2, said  # nothing can be captured before the first turn: the suite's error
    assert "turn 1: the request could not be written: {{captured.order}} has no value" in said, said
    assert "internal error" not in said and not list((tmp_path / "out").rglob("traceback.txt"))
    # `retries` are for infrastructure: the suite's own mistake comes out the same every time, so it is not re-run
    [run] = [p.parent.name for p in (tmp_path / "out").rglob("result.json")]
    assert run == "run-1", run


def test_a_request_template_whose_capture_the_agent_never_gave_fails_the_turn(tmp_path: Path, tamesu,
                                                                            rest_agents: RunningAgents) -> None:
    """`{{captured.order}}` in the body of the first request, sent after the agent's greeting (heard by `wait_for`)
    held no order: the agent never said what the capture looks for, so the test fails on that turn (exit 1), as a
    script step using it does; it was an infrastructure error, exit 3."""
    (tmp_path / "s.yaml").write_text(f"""\
targets:
  api:
    type: rest
    url: "{rest_agents.ws_url}?greet=1"
    streaming: websocket
    request: {{ body: {{ message: "{{{{message}}}} {{{{captured.order}}}}" }} }}
tests:
  - name: never said
    target: api
    capture: [ {{ name: order, regex: "(ORD-[0-9]+)" }} ]
    scenario: {{ script: [ {{ wait_for: welcome }}, {{ say: "my order?" }} ] }}
""")
    result = tamesu(["run", "s.yaml", "--out", "out"], cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert "turn 2: the request could not be written: {{captured.order}} has no value" in said, said
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert record["status"] == "failed" and record["fault"] == "agent", record
    assert len(record["turns"]) == 1, record["turns"]  # turn 2 was never sent


def test_a_failed_streamed_turn_keeps_its_events_as_a_streamed_turn_does(tmp_path: Path, tamesu,
                                                                        rest_agents: RunningAgents) -> None:
    """A stream that stalls past `turn_timeout` fails with the events that came before it, recorded as a streamed
    turn records them (`raw` every event, `response` the last); they were one list inside `raw`
    (`[[{"delta": "Let me"}]]`) and the list itself as `response`, which no reader of a streamed turn expects."""
    (tmp_path / "s.yaml").write_text(f"""\
targets:
  sse: {{ type: rest, url: "{rest_agents.url}/sse", streaming: sse, turn_timeout: 1s }}
tests:
  - name: stalls
    target: sse
    scenario: {{ script: [ {{ say: stall }} ] }}
""")
    result = tamesu(["run", "s.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    agent = record["turns"][0]["agent"]
    if agent["raw"]:  # on a loaded machine the first event may not have come within 1 s: nothing to keep
        assert agent["raw"] == [{"delta": "Let me"}] and agent["response"] == {"delta": "Let me"}, agent
