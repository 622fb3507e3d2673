"""The limits on what an agent's spans may cost, said rather than silent: a `span` count beside spans dropped
past `max_spans`, an attribute value of megabytes cut (marked, and a warning), and an OTLP/JSON export with one
bad id keeping its valid spans (OTLP's partial success tells the exporter how many were left out)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.traced import free_port


def _span(trace_id: str, parent: str, name: str = "tool", blob: int = 0, error: str = "") -> dict[str, Any]:
    now = time.time_ns()
    attributes = [{"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}}]
    if blob:
        attributes.append({"key": "blob", "value": {"stringValue": "x" * blob}})
    return {"traceId": trace_id, "spanId": f"{random.getrandbits(64):016x}", "parentSpanId": parent, "name": name,
            "kind": 1, "startTimeUnixNano": str(now - 1_000_000), "endTimeUnixNano": str(now),
            "status": {"code": 2, "message": error} if error else {"code": 1}, "attributes": attributes}


class ExportingAgent:
    """A REST agent that, before it answers, exports OTLP/JSON spans of the turn's trace as its message says:
    `many:N` N tool spans, `big:N` one with an N-character attribute, `stack:N` a failed one whose name and
    status message are N characters, `badid` one valid span and one whose trace
    id is not hex. It keeps what the receiver answered each export."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.answers: list[tuple[int, str]] = []

    async def chat(self, request: Request) -> JSONResponse:
        message = (await request.json())["message"]
        _, trace_id, parent, _ = request.headers["traceparent"].split("-")
        kind, _, count = message.partition(":")
        if kind == "many":
            spans = [_span(trace_id, parent) for _ in range(int(count))]
        elif kind == "big":
            spans = [_span(trace_id, parent, blob=int(count))]
        elif kind == "stack":  # an error whose message quotes megabytes (a prompt, a stack), and a name as long
            spans = [_span(trace_id, parent, name="tool " + "n" * int(count), error="e" * int(count))]
        else:
            spans = [_span(trace_id, parent), _span("zz" * 16, parent, name="bad")]
        export = {"resourceSpans": [{"resource": {"attributes": []},
                                     "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
        async with httpx.AsyncClient() as client:
            sent = await client.post(f"{self.endpoint}/v1/traces", json=export, timeout=10)
        self.answers.append((sent.status_code, sent.text))
        return JSONResponse({"reply": "ok"})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/chat", self.chat, methods=["POST"])])


def _run(tmp_path: Path, tamesu: Any, serve: Any, say: str, span: str, traces: str = "") -> tuple[Any, Any]:
    receive = f"127.0.0.1:{free_port()}"
    agent = ExportingAgent(f"http://{receive}")
    url = serve(agent.app()).url
    (tmp_path / "tamesu.yaml").write_text(
        f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', wait: 300ms{traces} }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }},
         response: {{ text: $.reply }} }}
tests:
  - name: t
    target: bot
    scenario: {{ script: [ {{ say: '{say}' }} ] }}
    assert: [ {{ span: {span} }} ]
""")
    return tamesu(["run", "--out", "out"], cwd=tmp_path), agent


def _run_files(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    [run_dir] = list((tmp_path / "out").iterdir())
    folder = run_dir / "suite" / "t" / "run-1"
    return json.loads((folder / "result.json").read_text()), json.loads((folder / "spans.json").read_text())


def test_a_span_count_says_the_spans_max_spans_did_not_keep(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: "3 span(s) with name ~ 'tool' among 3; expected exactly 5", as if the agent made 3
    done, _ = _run(tmp_path, tamesu, serve, "many:5", "{ name: tool, count: { equals: 5 } }", ", max_spans: 3")
    assert done.returncode == 1, done.stdout + done.stderr
    detail, _ = _run_files(tmp_path)
    [verdict] = detail["assertions"]
    assert verdict["reason"] == ("3 span(s) with name ~ /tool/ among 3 kept (2 more of the run's past "
                                 "traces.max_spans were not kept, so not counted); expected exactly 5"), verdict


def test_an_attribute_of_megabytes_is_cut_and_said(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: one span's 3 MB attribute was kept whole in spans.json (and the store, and every report)
    done, _ = _run(tmp_path, tamesu, serve, "big:3000000", "{ name: tool }")
    assert done.returncode == 0, done.stdout + done.stderr
    _, spans = _run_files(tmp_path)
    [span] = spans["spans"]
    blob = span["attributes"]["blob"]
    assert blob.startswith("x" * 65536) and blob.endswith("… [cut: 3,000,000 characters in all]"), len(blob)
    assert len(blob) < 70_000
    assert "warning: traces: 1 text(s) longer than 65,536 characters (attribute values, span names, status " \
           "messages) were cut to it" in done.stdout
    assert (next((tmp_path / "out").iterdir()) / "suite" / "t" / "run-1" / "spans.json").stat().st_size < 200_000


def test_one_bad_id_loses_only_its_span(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: the whole export was refused (400 "a trace or span id is not hex"), the valid span with it
    done, agent = _run(tmp_path, tamesu, serve, "badid", "{ name: tool, count: { equals: 1 } }")
    assert done.returncode == 0, done.stdout + done.stderr
    [(status, text)] = agent.answers
    assert status == 200 and json.loads(text) == {"partialSuccess": {
        "rejectedSpans": "1", "errorMessage": "a trace or span id is not hex: 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz'"}}
    _, spans = _run_files(tmp_path)
    assert [s["name"] for s in spans["spans"]] == ["tool"]
    assert "warning: traces: 1 span(s) were left out of the agent's exports (a trace or span id is not hex: " \
           "'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz'); the rest of those exports were kept" in done.stdout, done.stdout


def test_a_status_message_and_a_name_of_megabytes_are_cut_and_said(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: only attribute values were cut: an error's 3 MB message and a 3 MB name were kept whole
    done, _ = _run(tmp_path, tamesu, serve, "stack:3000000", "{ name: 'tool .*', status: error }")
    assert done.returncode == 0, done.stdout + done.stderr
    _, spans = _run_files(tmp_path)
    [span] = spans["spans"]
    assert span["status_message"].startswith("e" * 65536), len(span["status_message"])
    assert span["status_message"].endswith("… [cut: 3,000,000 characters in all]")
    assert span["name"].startswith("tool nnn") and span["name"].endswith("… [cut: 3,000,005 characters in all]")
    assert "warning: traces: 2 text(s) longer than 65,536 characters" in done.stdout, done.stdout
    assert (next((tmp_path / "out").iterdir()) / "suite" / "t" / "run-1" / "spans.json").stat().st_size < 400_000
