"""What a failed check quotes of the agent, in the one line every report shows (console, JUnit, JSON, Markdown):
each turn quoted on its own, separated by ` / `, cut at a turn's end or with `…`, never longer than a few hundred
characters. Before, a whole-transcript `contains` quoted the turns joined by a literal `\\n` and cut them mid-word
after 120 characters (the closing quote lost), and a 50 KB answer was quoted as far as the check's own limit went.
A real agent on 127.0.0.1 answers each message with what the test planned for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from conftest import run_tamesu
from model_servers import OpenAIServer, text
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer

HUGE = "lorem ipsum dolor " * 3000  # 54 KB in one answer

ANSWERS = {
    "hello": "Hello!\nHow can I help?",
    "order": "Your order ships Friday.\n\nAnything else?",
    "huge": HUGE,
}


def _agent() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        return JSONResponse({"text": ANSWERS.get(message, f"about {message}: {'more words ' * 12}")})

    async def backend(request: Request) -> PlainTextResponse:
        # a backend's error page: many lines, 54 KB
        return PlainTextResponse("Internal error\nTraceback:\n" + HUGE, status_code=500)

    return Starlette(routes=[Route("/chat", chat, methods=["POST"]), Route("/orders", backend)])


def _failures(tmp_path: Path, serve: Callable[[Any], ThreadServer], tests: list[dict[str, Any]],
              server: ThreadServer | None = None) -> dict[str, str]:
    """Each test's `failure` line in report.json, after a real run."""
    server = server or serve(_agent())
    target = {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text"}}
    (tmp_path / "s.yaml").write_text(json.dumps({"name": "s", "targets": {"bot": target}, "tests": tests}))
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "json"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    return {t["test"].removeprefix("s/"): t["failure"] for t in report["tests"]}


def _script(*messages: str) -> dict[str, Any]:
    return {"script": [{"say": m} for m in messages]}


def test_a_whole_transcript_is_quoted_turn_by_turn_on_one_line(tmp_path: Path,
                                                                serve: Callable[[Any], ThreadServer]) -> None:
    failures = _failures(tmp_path, serve, [
        {"name": "two", "scenario": _script("hello", "order"), "assert": [{"contains": "refund"}]},
        {"name": "many", "scenario": _script("hello", "order", "a", "b", "c", "d", "e"),
         "assert": [{"contains": "refund"}]},
        {"name": "huge", "scenario": _script("hello", "huge"), "assert": [{"contains": "refund"}]},
        {"name": "first huge", "scenario": _script("huge", "hello"), "assert": [{"contains": "refund"}]},
    ])
    assert failures["two"] == ('contains: expected the agent to say "refund"; not found in 2 turn(s) of agent text: '
                               '"Hello! How can I help?" / "Your order ships Friday. Anything else?"')
    many = failures["many"]
    assert "\\n" not in many and '"Hello! How can I help?" / "Your order ships Friday. Anything else?" / ' in many
    # whole turns up to the bound, then how many were left out
    assert many.endswith('more words" / … and 4 more turns'), many
    assert len(many) < 450, len(many)
    # a huge answer after a short one: cut at the turn's boundary; first: cut within it, inside its quotes
    assert failures["huge"].endswith('"Hello! How can I help?" / … and 1 more turn'), failures["huge"]
    first = failures["first huge"]
    # the cut falls at the end of "ipsum": the word is kept (it was dropped too, back to "lorem")
    assert first.endswith('lorem ipsum…" / … and 1 more turn'), first[-80:]
    assert 300 < len(first) < 450, len(first)


def test_a_not_contains_quotes_the_turn_it_found_on_one_line(tmp_path: Path,
                                                             serve: Callable[[Any], ThreadServer]) -> None:
    failures = _failures(tmp_path, serve, [
        {"name": "found", "scenario": _script("hello", "order"), "assert": [{"not_contains": "Friday"}]},
    ])
    assert failures["found"] == ('not_contains: expected the agent never to say "Friday"; '
                                 'turn 2 said: "Your order ships Friday. Anything else?"')


CHECKS = """
def quotes_the_answer(run):
    assert "RF-" in run.text, f"no reference in: {run.text}"
"""


def test_what_other_checks_quote_is_one_line_and_bounded(tmp_path: Path,
                                                         serve: Callable[[Any], ThreadServer]) -> None:
    # each quoted its text with its line breaks as \n, cut after 120 characters with the closing quote lost (a
    # command's output after 300), and a script's own reason (`assert ok, run.text`) was the whole 54 KB answer
    server = serve(_agent())
    (tmp_path / "checks.py").write_text(CHECKS)
    (tmp_path / "out.sh").write_text("for i in 1 2 3 4 5 6; do\n  echo line $i; printf '%0.sword ' $(seq 40); echo\n"
                                     "done\necho connection refused\n")
    failures = _failures(tmp_path, serve, [
        {"name": "regex", "scenario": _script("hello"), "assert": [{"not_regex": "Hello!\\s+How"}]},
        {"name": "equals", "scenario": _script("order"), "assert": [{"equals": "Done."}]},
        {"name": "script", "scenario": _script("huge"), "assert": [{"script": "checks:quotes_the_answer"}]},
        {"name": "http", "scenario": _script("hello"), "assert": [{"http": {"url": f"{server.url}/orders"}}]},
        {"name": "command", "scenario": _script("hello"), "assert": [{"command": {"run": "sh out.sh",
                                                                                   "contains": "refunded"}}]},
    ], server)
    assert failures["regex"] == ('not_regex: expected no match for /Hello!\\s+How/; turn 1 has "Hello! How"')
    assert failures["equals"] == ('equals: expected exactly "Done.", turn 1 said "Your order ships Friday. '
                                  'Anything else?"')
    script = failures["script"]
    assert script.startswith("script: no reference in: lorem ipsum"), script[:100]
    assert script.endswith("…") and len(script) < 1100, len(script)
    http = failures["http"]
    assert http.startswith(f'http: GET {server.url}/orders: expected status 2xx, found 500: "Internal error '
                           'Traceback: lorem ipsum'), http
    assert http.endswith('…"') and len(http) < 250, http
    command = failures["command"]
    # the end of a command's output is what it said last: the start is what is cut
    assert command.startswith('command: `sh out.sh`: expected the output to contain "refunded"; exit code 0, '
                              'output: "…'), command
    assert command.endswith("word  | line 6 | " + "word " * 40 + ' | connection refused"'), command
    assert len(command) < 450, command


def test_a_judges_paragraphs_are_one_line(tmp_path: Path, serve: Callable[[Any], ThreadServer]) -> None:
    judge = OpenAIServer()
    url = judge.base_url(serve(judge.app).url)
    said = "The agent never apologised.\n\nIt also did not offer a refund:\n- no refund\n- no date\n" * 40
    judge.plan(text(json.dumps({"pass": False, "score": 0, "reason": said, "evidence": []})))
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
  judge: {{ provider: openai, model: judge-model, base_url: "{url}", timeout: 5s }}
tests:
  - {{ name: judged, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ judge: "The agent apologises" }} ] }}
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--no-cache", "--report", "json"], cwd=tmp_path,
                      env={"OPENAI_API_KEY": "sk-local-0123456789"})
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    failure = report["tests"][0]["failure"]
    assert failure.startswith('judge: rubric "The agent apologises": The agent never apologised. It also did not '
                              'offer a refund: - no refund - no date The agent'), failure[:200]
    assert "\n" not in failure and failure.endswith("…") and len(failure) < 1100, len(failure)


def _looping_agent() -> Starlette:
    """Calls lookup_order 300 times, then 25 other tools once each."""
    calls = [{"name": "lookup_order", "args": {"id": i}} for i in range(300)]
    calls += [{"name": f"tool_{i}", "args": {}} for i in range(25)]

    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": "done", "tool_calls": calls})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def test_the_tools_of_a_looping_agent_are_counted_not_listed(tmp_path: Path,
                                                             serve: Callable[[Any], ThreadServer]) -> None:
    # each of the 325 calls was named, `lookup_order, lookup_order, ...`, some 5 KB in the one line
    server = serve(_looping_agent())
    target = {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text", "tool_calls": "$.tool_calls"}}
    (tmp_path / "s.yaml").write_text(json.dumps({"name": "s", "targets": {"bot": target}, "tests": [
        {"name": "called", "scenario": _script("hi"), "assert": [{"tool_called": "refund"}]},
        {"name": "sequence", "scenario": _script("hi"), "assert": [{"tool_sequence": ["lookup_order", "refund"]}]},
    ]}))
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "json"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    failures = {t["test"]: t["failure"] for t in report["tests"]}
    others = ", ".join(f"tool_{i}" for i in range(19))
    assert failures["called"] == ("tool_called: expected a call to refund; tools called: lookup_order ×300, "
                                  f"{others}, … and 6 more tools")
    steps = " -> ".join(f"tool_{i}" for i in range(19))
    assert failures["sequence"] == ("tool_sequence: expected in order: lookup_order -> refund; found lookup_order "
                                    f"×300 -> {steps} -> … and 6 more calls (no refund after the calls before it)")


PARSING = """
from pydantic import BaseModel


class Order(BaseModel):
    id: str
    total: int


def reads_the_order(run):
    Order.model_validate({"total": run.text})
"""


def test_a_script_that_raises_a_validation_error_is_one_line(tmp_path: Path,
                                                             serve: Callable[[Any], ThreadServer]) -> None:
    # the project's function reads the answer into a model: pydantic's message was six lines, each error with the
    # input's repr (the answer) and a link, as the test's error line
    server = serve(_agent())
    target = {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text"}}
    (tmp_path / "checks.py").write_text(PARSING)
    (tmp_path / "s.yaml").write_text(json.dumps({"name": "s", "targets": {"bot": target}, "tests": [
        {"name": "parsed", "scenario": _script("huge"), "assert": [{"script": "checks:reads_the_order"}]}]}))
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "json"], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    assert report["tests"][0]["failure"] == (
        "script: script checks:reads_the_order raised ValidationError: Order: id: Field required (and 1 more)")
    assert "lorem" not in done.stdout and "errors.pydantic.dev" not in done.stdout, done.stdout


def _refusing_agent() -> Starlette:
    """`m1`..`m20` answered 404; from `m21` on, odd ones 409 and even ones 200."""
    async def chat(request: Request) -> JSONResponse:
        number = int(str((await request.json()).get("message", "m0"))[1:])
        status = 404 if number <= 20 else 409 if number % 2 else 200
        return JSONResponse({"text": f"answer {number}"}, status_code=status)

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def test_the_turns_a_status_check_refused_are_grouped(tmp_path: Path, serve: Callable[[Any], ThreadServer]) -> None:
    # each turn was its own clause: `turn 1 was 404, turn 2 was 404, ...`
    server = serve(_refusing_agent())
    target = {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text"}}
    (tmp_path / "s.yaml").write_text(json.dumps({"name": "s", "targets": {"bot": target}, "tests": [
        {"name": "statuses", "scenario": {**_script(*(f"m{i}" for i in range(1, 45))), "max_turns": 44},
         "assert": [{"status": "2xx"}]},
    ]}))
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "json"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    assert report["tests"][0]["failure"] == ("status: expected HTTP status 2xx on every turn; turns 1-20 were 404, "
                                             "turns 21, 23, 25, 27, 29, 31, 33, 35, 37, 39 and 2 more were 409")


async def test_what_not_contains_found_is_quoted_from_a_words_edge() -> None:
    # it cut 40 characters before the match wherever they fell: "…01 (blue sneakers) is shipped, arriving Friday."
    from checks.grading import fails
    from checks.test_checks import said

    found = await fails({"not_contains": "Friday"}, said("Order ORD-1001 (blue sneakers) is shipped, arriving Friday."))
    assert found.reason == ('expected the agent never to say "Friday"; turn 1 said: "…(blue sneakers) is shipped, '
                            'arriving Friday."'), found.reason
    found = await fails({"not_contains": "ORD-1001"},
                        said("Order ORD-1001 (blue sneakers) is shipped and arrives on Friday at the latest, we hope"))
    assert found.evidence == ["Order ORD-1001 (blue sneakers) is shipped and arrives…"], found.evidence
