"""Chat widgets whose messages come late or keep coming: an answer streamed for longer than the turn may wait, a
last answer still being written when the look after the last turn ends. Each page is written for its test, served
by tests/agents/web_pages.py and driven in Debian's Chromium (one shared by the session, attached over CDP)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_fixtures import served_pages, shared_chromium, skip_without_browser
from conftest import run_tamesu, why

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]
FIXTURES = (shared_chromium,)

_STREAM = """const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (text) => {
  const div = document.createElement("div");
  div.className = "msg agent";
  div.setAttribute("role", "article");
  div.setAttribute("aria-label", "assistant");
  div.textContent = text;
  document.getElementById("log").append(div);
  return div;
};
const stream = async (asked, words, every) => {
  const reply = say("Answer to " + asked + ":");
  for (let i = 1; i <= words; i++) { await sleep(every); reply.textContent += " w" + i; }
};"""

_PAGES = {
    # the answer streams a word every 150 ms for 6 s from the moment the words are sent
    "streams.html": """<!doctype html><html><body><div id="log"></div>
<form id="f"><input id="q"><button>Send</button></form>
<script>""" + _STREAM + """
document.getElementById("f").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  stream(asked, 40, 150);
});
</script></body></html>""",
    # greets 5 s after it opens, taking the words meanwhile, so the greeting is read as the first turn's answer (the
    # turn ends done.quiet, 0.4 s, after it). The answer starts 1.3 s after the greeting, inside the look after the
    # last turn (until the greeting's time from the words, half that again and done.quiet: some 2.5 s after the
    # greeting), and streams a word every 200 ms for 12 s, past the look's turn_timeout (8 s)
    "greets-streams.html": """<!doctype html><html><body><button id="open">Chat</button>
<div id="widget" hidden><div id="log"></div><form id="f"><input id="q"><button>Send</button></form></div>
<script>""" + _STREAM + """
let greeted;
const greeting = new Promise((resolve) => { greeted = resolve; });
document.getElementById("open").addEventListener("click", async () => {
  document.getElementById("widget").hidden = false;
  document.getElementById("open").hidden = true;
  await sleep(5000);
  say("Hi! I am the shop's assistant.");
  greeted();
});
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  await greeting;
  await sleep(1300);
  stream(asked, 60, 200);
});
</script></body></html>""",
    # greets 1 s after it opens, taking the words meanwhile; its backend answers them 4 s after they are sent, far
    # later than the look after the last turn watches (the greeting's time from the words, at least 1 s more, and
    # done.quiet) when the greeting was read as the answer
    "greets-then-calls.html": """<!doctype html><html><body><button id="open">Chat</button>
<div id="widget" hidden><div id="log"></div><form id="f"><input id="q"><button>Send</button></form></div>
<script>""" + _STREAM + """
document.getElementById("open").addEventListener("click", async () => {
  document.getElementById("widget").hidden = false;
  document.getElementById("open").hidden = true;
  await sleep(1000);
  say("Hi! I am the shop's assistant.");
});
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  await (await fetch("/echo?d=4000&t=text/plain&m=" + encodeURIComponent(asked))).text();
  say("Answer to " + asked + ".");
});
</script></body></html>""",
    # greets the moment its input has the focus (as the words are typed into it); answers 1 s after them
    "greets-on-focus.html": """<!doctype html><html><body><div id="log"></div>
<form id="f"><input id="q"><button>Send</button></form>
<script>""" + _STREAM + """
document.getElementById("q").addEventListener("focus", () => {
  if (!document.querySelector(".msg")) say("Hi! I am the shop's assistant.");
}, {once: true});
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  await sleep(1000);
  say("Answer to " + asked + ".");
});
</script></body></html>""",
    # answers 300 ms after the words, then asks its backend for news over and over (40 times), each call out 700 ms
    "polls.html": """<!doctype html><html><body><div id="log"></div>
<form id="f"><input id="q"><button>Send</button></form>
<script>""" + _STREAM + """
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  await sleep(300);
  say("Answer to " + asked + ".");
  // 40 calls (28 s, past the 15 s the test allows): a page left open never polls for ever
  for (let call = 0; call < 40; call++) await (await fetch("/echo?d=700&t=text/plain&m=news")).text();
});
</script></body></html>""",
    # a widget in an iframe that takes itself away 1.8 s after it answered, while the look after the last turn
    # watches it: the answer 5 s after the words, so the turn ends some 5.6 s after them (its quiet 0.4 s) and the
    # look watches until 5 + 2.5 (half the slowest answer) + 0.4 s; the iframe goes at 6.8 s, over a second from
    # either (at 0.3 + 0.9 s it went before a loaded turn 1 had read its answer, at 1.5 + 1.5 s after the look)
    "leaves.html": '<!doctype html><html><body><h1>Shop</h1><iframe title="Chat" src="leaving.html"></iframe>'
                   '</body></html>',
    "leaving.html": """<!doctype html><html><body><div id="log"></div>
<form id="f"><input id="q"><button>Send</button></form>
<script>""" + _STREAM + """
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  await sleep(5000);
  say("Answer to " + asked + ".");
  await sleep(1800);
  parent.document.querySelector("iframe").remove();
});
</script></body></html>""",
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    skip_without_browser()
    with served_pages(tmp_path_factory.mktemp("pages"), _PAGES) as url:
        yield url


def _run(tmp_path: Path, suite: str, pages: str, cdp: str, parallel: int = 1
         ) -> tuple[str, dict[str, dict[str, Any]], Path]:
    # `parallel`: a suite's tests that mostly wait on their pages' clocks run side by side (the browser group is the
    # last lane of `make test`). Not the five widgets of the late greeting: side by side, at load 17, the polling
    # one went past its 15 s and the late greeter's words came after its greeting
    (tmp_path / "suite.yaml").write_text(suite)
    done = run_tamesu(["run", "suite.yaml", "--out", "out", "--parallel", str(parallel)], cwd=tmp_path,
                      env={"PAGES": pages, "TAMESU_BROWSER_CDP_URL": cdp})
    run_dir = next((tmp_path / "out").iterdir())
    rows = {row["test"]: row for row in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    return done.stdout + done.stderr, rows, run_dir


def _result(run_dir: Path, test: str) -> dict[str, Any]:
    return json.loads((run_dir / "suite" / test / "run-1" / "result.json").read_text())


def test_an_answer_streamed_past_turn_timeout_fails_the_turn_whatever_finds_the_messages(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """Messages found by `{ role, name }` were read as they stood at turn_timeout, cut, with nothing said (the test
    passed on half an answer), where a CSS selector's turn failed saying they kept changing."""
    output, rows, _ = _run(tmp_path, """
targets:
  css:
    type: browser
    url: "{{env.PAGES}}streams.html"
    turn_timeout: 2
    chat: { input: "#q", messages: ".msg.agent" }
  role:
    type: browser
    url: "{{env.PAGES}}streams.html"
    turn_timeout: 2
    chat: { input: "#q", messages: { role: article, name: assistant } }
tests:
  - { name: css, target: css, scenario: { script: [{ say: one }] } }
  - { name: role, target: role, scenario: { script: [{ say: one }] } }
""", pages, shared_chromium, parallel=2)
    for test in ("css", "role"):
        assert rows[test]["status"] == "failed", (test, why(rows[test]), output)
        assert "turn 1: the agent's messages kept changing for 2s" in str(rows[test]["runs"][0]["failures"]), \
            (test, why(rows[test]))


def test_a_late_answer_still_streaming_when_the_last_look_ends_is_said_cut(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """The look after the last turn read a late message with a turn_timeout of its own, inside a cap of turn_timeout
    and 5 s on the whole look: a message still being written then was dropped with nothing said (a CSS selector's
    read failed, and the failure was swallowed) or said as it stood with no word that it was cut (`{ role, name }`).
    Now the look, its reading included, takes at most turn_timeout, and what it cut is said."""
    output, rows, run_dir = _run(tmp_path, """
targets:
  css:
    type: browser
    url: "{{env.PAGES}}greets-streams.html"
    turn_timeout: 8
    chat: { input: "#q", messages: ".msg.agent", open: "#open" }
  role:
    type: browser
    url: "{{env.PAGES}}greets-streams.html"
    turn_timeout: 8
    chat: { input: "#q", messages: { role: article, name: assistant }, open: "#open" }
tests:
  - { name: css, target: css, scenario: { script: [{ say: one }] } }
  - { name: role, target: role, scenario: { script: [{ say: one }] } }
""", pages, shared_chromium, parallel=2)
    for test in ("css", "role"):
        assert rows[test]["status"] == "passed", (test, why(rows[test]), output)
        result = _result(run_dir, test)
        assert [turn["agent"]["text"] for turn in result["turns"]] == ["Hi! I am the shop's assistant."]
        unread = [e for e in result["events"] if e["name"] == "chat_unread"]
        assert len(unread) == 1, (test, result["events"])
        said = unread[0]["data"]
        assert (said["after_turn"], said.get("cut"), said.get("limit_s")) == (1, True, 8), (test, said)
        streamed = said["messages"][0]
        assert streamed.startswith("Answer to one: w1 w2") and not streamed.endswith("w60"), (test, streamed)
        assert "still being written when the look after the last turn ended, turn_timeout (8s) after it began" \
            in said["hint"], said["hint"]
        # the look, its reading included, ends at turn_timeout: a moment after the turn, not 8 s more
        read_at = result["turns"][0]["agent"]["completed_at_ms"]
        assert unread[0]["at_ms"] - read_at < 8000 + 3000, (test, unread[0]["at_ms"], read_at)
    assert "along the way: 2 chat turns followed by widget messages no turn read" in output, output


def test_a_single_turn_against_a_widget_that_greets_late_says_where_the_answer_went(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """A widget that greets a moment after it opens had its greeting read as the only turn's answer; the answer,
    fetched by its backend for longer than the greeting took, came after the look that follows the last turn and
    went unsaid (the test failed on a greeting, nothing saying why). One that greets as its input takes the focus
    wrote the greeting while the words were typed: no turn had it, unsaid; and with `chat.greeting` its greeting
    turn waited for a greeting that no focus ever set off (`the agent wrote no greeting ... within 5s`). The look
    that waits for the calls the page made since the words were sent waits for those out when its watch ended: a
    widget that polls its backend sends the next call as one ends, and would keep it until turn_timeout."""
    output, rows, run_dir = _run(tmp_path, """
targets:
  late:
    type: browser
    url: "{{env.PAGES}}greets-then-calls.html"
    chat: { input: "#q", messages: ".msg.agent", open: "#open" }
  late-greets:
    type: browser
    url: "{{env.PAGES}}greets-then-calls.html"
    chat: { input: "#q", messages: ".msg.agent", open: "#open", greeting: true }
  focus:
    type: browser
    url: "{{env.PAGES}}greets-on-focus.html"
    chat: { input: "#q", messages: ".msg.agent" }
  focus-greets:
    type: browser
    url: "{{env.PAGES}}greets-on-focus.html"
    turn_timeout: 5
    chat: { input: "#q", messages: ".msg.agent", greeting: true }
  polls:
    type: browser
    url: "{{env.PAGES}}polls.html"
    turn_timeout: 30
    chat: { input: "#q", messages: ".msg.agent" }
tests:
  - { name: late, target: late, scenario: { script: [{ say: one }] } }
  - { name: late-greets, target: late-greets, scenario: { script: [{ say: one }] } }
  - { name: focus, target: focus, scenario: { script: [{ say: one }] } }
  - { name: focus-greets, target: focus-greets, scenario: { script: [{ say: one }] } }
  - { name: polls, target: polls, scenario: { script: [{ say: one }] } }
""", pages, shared_chromium)
    assert {test: row["status"] for test, row in rows.items()} == {
        "late": "passed", "late-greets": "passed", "focus": "passed", "focus-greets": "passed",
        "polls": "passed"}, \
        ([why(row) for row in rows.values()], output)
    texts = {test: [turn["agent"]["text"] for turn in _result(run_dir, test)["turns"]] for test in rows}
    greeting, answer = "Hi! I am the shop's assistant.", "Answer to one."
    # with chat.greeting, the greeting is the agent's own turn and the answer the answer
    assert texts["late-greets"] == texts["focus-greets"] == [greeting, answer], texts
    # without it, where the greeting and the answer went is said
    assert texts["late"] == [greeting] and texts["focus"] == [answer], texts
    unread = {test: [e["data"] for e in _result(run_dir, test)["events"] if e["name"] == "chat_unread"]
              for test in ("late", "focus")}
    assert [(e["after_turn"], e["messages"]) for e in unread["late"]] == [(1, [answer])], unread
    assert "set chat.greeting: true" in unread["late"][0]["hint"]
    assert [(e["after_turn"], e["messages"]) for e in unread["focus"]] == [(0, [greeting])], unread
    assert "after it opened and before the first words were sent, so no turn has them: a greeting (set " \
           "chat.greeting: true to have it as the agent's turn 1)" in unread["focus"][0]["hint"]
    # the greeting followed no turn: said as what it is (before: "2 chat turns followed by widget messages"), the
    # same in the HTML report's header
    said = ("along the way: 1 chat turn followed by widget messages no turn read (a greeting the widget writes late "
            "reads each answer a turn late: chat.greeting) (chat_unread, 1 test); 1 widget greeting written before "
            "the first turn, read by no turn (chat.greeting: true reads it as turn 1) (chat_unread after_turn 0, 1 "
            "test)")
    assert said in output, output
    assert f'<p class="note along-the-way">{said}</p>' in (run_dir / "report.html").read_text(), said
    # the look waits for the calls out when its watch ended, not for every call a widget that polls sends after them
    polls = _result(run_dir, "polls")
    assert texts["polls"] == [answer] and not [e for e in polls["events"] if e["name"] == "chat_unread"], polls
    assert polls["duration_ms"] < 15_000, polls["duration_ms"]


def test_a_widget_whose_iframe_never_comes_fails_its_first_turn_at_step_timeout_once(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """The count of the widget's messages once it opened (for a greeting written as the first words are typed) waited
    step_timeout for the widget's iframe, and the first turn waited step_timeout again before it failed."""
    output, rows, run_dir = _run(tmp_path, """
targets:
  frameless:
    type: browser
    url: "{{env.PAGES}}streams.html"
    step_timeout: 5s
    chat: { input: "#q", messages: ".msg.agent", frame: "iframe[title=Chat]" }
tests:
  - { name: frameless, target: frameless, scenario: { script: [{ say: one }] } }
""", pages, shared_chromium)
    assert rows["frameless"]["status"] == "failed", output
    result = _result(run_dir, "frameless")
    failed = next(e for e in result["events"] if e["name"] == "turn_failed")
    opened = next(e for e in result["events"] if e["name"] == "browser_open")
    assert "the chat frame 'iframe[title=Chat]' is not in the page within 5s" in failed["data"]["reason"], failed
    assert failed["at_ms"] - opened["at_ms"] < 8_500, (failed["at_ms"], opened["at_ms"])


def test_a_widget_that_goes_away_during_the_last_look_is_said(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """Whatever failed during the look after the last turn (the widget's iframe gone, the page not answering) was
    swallowed: nothing said the look had not watched. It fails nothing, and is said (`chat_last_look_failed`)."""
    output, rows, run_dir = _run(tmp_path, """
targets:
  leaves:
    type: browser
    url: "{{env.PAGES}}leaves.html"
    step_timeout: 1s
    chat: { input: "#q", messages: ".msg.agent", frame: "iframe[title=Chat]" }
tests:
  - { name: leaves, target: leaves, scenario: { script: [{ say: one }] } }
""", pages, shared_chromium)
    assert rows["leaves"]["status"] == "passed", (why(rows["leaves"]), output)
    result = _result(run_dir, "leaves")
    assert [turn["agent"]["text"] for turn in result["turns"]] == ["Answer to one."]
    failed = [e["data"] for e in result["events"] if e["name"] == "chat_last_look_failed"]
    assert len(failed) == 1 and failed[0]["reason"], result["events"]
