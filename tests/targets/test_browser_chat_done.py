"""Chat widgets that say an answer is finished by showing something (`chat.done.visible`), and whose messages are
found by their accessible role and name: widgets written for the test, served by a real HTTP server, driven
in Debian's Chromium.

Both answer in two parts with a pause longer than `done.quiet` between them, so a turn that stopped waiting
too early would read half an answer: the first widget adds a "Was this helpful?" button under every finished
answer (the earlier ones stay shown), the second hides one "Answered" line while it works and shows it again.
A third does the same within a few milliseconds; a done sign that was shown all along fails the turn, saying so.
A typing sign (`done.hidden`) hidden at the end keeps the answer whole; one whose selector matches nothing (a
typo) fails the turn, saying so (it read half the answer, at its pause, and blamed the agent)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_fixtures import shared_chromium, skip_without_browser
from conftest import run_tamesu, why
from lifeline import tied

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]
FIXTURES = (shared_chromium,)

_PAUSE_MS = 900
"""The widgets' pause between an answer's two parts: more than twice `done.quiet`."""

_WIDGET = """<!doctype html><html><head><title>{title}</title></head><body>
<div id="log" role="log" aria-label="conversation"></div>
<p id="answered" {answered_at_start}>Answered</p>
<p id="typing" hidden>typing...</p>
<form id="f"><input id="q" aria-label="Message" autocomplete="off"><button>Send</button></form>
<script>
const log = document.getElementById("log"), answered = document.getElementById("answered");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
function message(who, text) {{
  const div = document.createElement("div");
  div.setAttribute("role", "article");
  div.setAttribute("aria-label", who + " message");
  div.className = "msg " + who;
  div.textContent = text;
  log.append(div);
  return div;
}}
document.getElementById("f").addEventListener("submit", async (event) => {{
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  message("your", asked);
  answered.hidden = {hide_while_working};
  const typing = document.getElementById("typing");
  typing.hidden = false;
  const reply = message("assistant", "");
  await sleep({first_after});
  reply.textContent = "You asked: " + asked + ".";
  await sleep({pause});
  reply.textContent += " That is all about " + asked + ".";
  typing.hidden = true;
  answered.hidden = false;
  if ({button_per_answer}) {{
    const rate = document.createElement("button");
    rate.type = "button";
    rate.textContent = "Was this helpful?";
    log.append(rate);
  }}
}});
</script></body></html>
"""


_SHADOW = """<!doctype html><html><body><shadow-chat></shadow-chat><script>
customElements.define("shadow-chat", class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: "open"});
    root.innerHTML = '<div id="log"></div><p id="typing" hidden>typing...</p>'
      + '<form id="f"><input id="q"><button>Send</button></form>';
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    root.getElementById("f").addEventListener("submit", async (event) => {
      event.preventDefault();
      const input = root.getElementById("q"), asked = input.value, typing = root.getElementById("typing");
      input.value = "";
      typing.hidden = false;
      const reply = document.createElement("div");
      reply.className = "msg assistant";
      root.getElementById("log").append(reply);
      await sleep(50);
      reply.textContent = "You asked: " + asked + ".";
      await sleep(__PAUSE__);
      reply.textContent += " That is all about " + asked + ".";
      typing.hidden = true;
    });
  }
});
</script></body></html>
"""


@pytest.fixture()
def widgets(tmp_path: Path) -> Iterator[str]:
    """The two widgets under `python -m http.server` on a free port; its base URL."""
    skip_without_browser()
    site = tmp_path / "site"
    site.mkdir()
    (site / "feedback.html").write_text(_WIDGET.format(
        title="feedback", answered_at_start="hidden", hide_while_working="false", first_after=50, pause=_PAUSE_MS,
        button_per_answer="true"))
    (site / "status.html").write_text(_WIDGET.format(
        title="status", answered_at_start="hidden", hide_while_working="true", first_after=50, pause=_PAUSE_MS,
        button_per_answer="false"))
    # hidden and shown again within a few milliseconds: between two of tamesu's polls
    (site / "quick.html").write_text(_WIDGET.format(
        title="quick", answered_at_start="", hide_while_working="true", first_after=1, pause=1,
        button_per_answer="false"))
    # the same widget inside a custom element's open shadow root (most embedded vendor widgets): its messages
    # were never read ("'.msg.assistant' still matches 0")
    (site / "shadow.html").write_text(_SHADOW.replace("__PAUSE__", str(_PAUSE_MS)))
    # a widget whose send handler throws: the turn says the page's script failed, not only that nobody answered
    (site / "broken.html").write_text(
        '<!doctype html><html><body><div id="log"></div><form id="f"><input id="q"><button>Send</button></form>'
        '<script>document.getElementById("f").addEventListener("submit", (e) => { e.preventDefault(); '
        'undefinedFunctionCall(); });</script></body></html>')
    server = subprocess.Popen(tied([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                                    "--directory", str(site)]),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        port = re.search(r"port (\d+)", line)
        assert port, line
        yield f"http://127.0.0.1:{port.group(1)}/"
    finally:
        server.terminate()
        server.wait(timeout=10)


_SUITE = """
name: done
targets:
  feedback:
    type: browser
    url: "{{env.WIDGETS}}feedback.html"
    chat:
      input: { role: textbox, name: Message }
      messages: { role: article, name: assistant }
      done: { visible: { role: button, name: "Was this helpful" }, quiet: 0.3 }
  status:
    type: browser
    url: "{{env.WIDGETS}}status.html"
    chat:
      input: "#q"
      messages: ".msg.assistant"
      done: { visible: "#answered", quiet: 0.3 }
  quick:
    type: browser
    url: "{{env.WIDGETS}}quick.html"
    chat:
      input: "#q"
      messages: ".msg.assistant"
      done: { visible: "#answered", quiet: 0.3 }
  typing:
    type: browser
    url: "{{env.WIDGETS}}status.html"
    chat: { input: "#q", messages: ".msg.assistant", done: { hidden: "#typing", quiet: 0.3 } }
  typo:
    type: browser
    url: "{{env.WIDGETS}}status.html"
    chat: { input: "#q", messages: ".msg.assistant", done: { hidden: "#typnig", quiet: 0.3 } }
  shadow:
    type: browser
    url: "{{env.WIDGETS}}shadow.html"
    chat: { input: "#q", messages: ".msg.assistant", done: { hidden: "#typing", quiet: 0.3 } }
  broken:
    type: browser
    url: "{{env.WIDGETS}}broken.html"
    turn_timeout: 2
    chat: { input: "#q", messages: ".msg", done: { quiet: 0.3 } }
  both-sides:
    type: browser
    url: "{{env.WIDGETS}}status.html"
    chat: { input: "#q", messages: ".msg", done: { hidden: "#typing", quiet: 0.3 } }
  missing:
    type: browser
    url: "{{env.WIDGETS}}missing.html"
    chat: { input: "#q", messages: ".msg", done: { quiet: 0.3 } }
    step_timeout: 1
  never-done:
    type: browser
    url: "{{env.WIDGETS}}quick.html"
    turn_timeout: 2
    chat:
      input: "#q"
      messages: ".msg.assistant"
      done: { visible: "#f" }
tests:
  - name: three answers each marked by a new button
    target: feedback
    scenario:
      script: [{ say: pears }, { say: plums }, { say: figs }]
    assert:
      - { contains: "That is all about pears.", on_turn: 1 }
      - { contains: "That is all about plums.", on_turn: 2 }
      - { contains: "That is all about figs.", on_turn: 3 }
  - name: three answers each marked by one line shown again
    target: status
    scenario:
      script: [{ say: pears }, { say: plums }, { say: figs }]
    assert:
      - { contains: "That is all about pears.", on_turn: 1 }
      - { contains: "That is all about plums.", on_turn: 2 }
      - { contains: "That is all about figs.", on_turn: 3 }
  - name: a sign hidden and shown again at once
    target: quick
    scenario:
      script: [{ say: pears }, { say: plums }, { say: figs }]
    assert:
      - { contains: "That is all about figs.", on_turn: 3 }
  - name: a sign that was always there
    target: never-done
    scenario:
      script: [{ say: pears }]
  - name: a typing sign hidden at the end
    target: typing
    scenario:
      script: [{ say: pears }]
    assert:
      - { contains: "That is all about pears." }
  - name: a busy sign misspelt
    target: typo
    scenario:
      script: [{ say: pears }]
  - name: a widget in a shadow root
    target: shadow
    scenario:
      script: [{ say: pears }, { say: plums }]
    assert:
      - { contains: "That is all about pears.", on_turn: 1 }
      - { contains: "That is all about plums.", on_turn: 2 }
  - name: a script that throws
    target: broken
    scenario:
      script: [{ say: pears }]
  - name: a messages selector that matches both sides
    target: both-sides
    scenario:
      script: [{ say: pears }, { say: plums }]
    assert:
      - { not_contains: pears, on_turn: 2 }
  - name: a page that is not there
    target: missing
    scenario:
      script: [{ say: pears }]
"""


def test_done_visible_waits_for_this_answers_sign_and_role_selectors_read_the_messages(
        tmp_path: Path, widgets: str, shared_chromium: str) -> None:
    (tmp_path / "done.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "done.tamesu.yaml", "--out", "out", "--parallel", "4"], cwd=tmp_path,
                      env={"WIDGETS": widgets, "TAMESU_BROWSER_CDP_URL": shared_chromium})
    run_dir = next((tmp_path / "out").iterdir())
    rows = {row["test"]: row for row in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {test: row["status"] for test, row in rows.items()} == {
        "three answers each marked by a new button": "passed",
        "three answers each marked by one line shown again": "passed",
        "a sign hidden and shown again at once": "passed",
        "a sign that was always there": "failed",
        "a typing sign hidden at the end": "passed",
        "a busy sign misspelt": "failed",
        "a widget in a shadow root": "passed",
        "a script that throws": "failed",
        "a messages selector that matches both sides": "passed",
        "a page that is not there": "failed"}, "\n".join(why(row) for row in rows.values()) + done.stderr
    assert done.returncode == 1
    never = rows["a sign that was always there"]["runs"][0]["failures"]
    assert any("the agent's answer never finished within 2s (done: '#f' was not shown for this answer; 1 shown "
               "before it was sent stayed shown)" in str(failure) for failure in never), never
    # a misspelt busy sign is hidden at once: the answer was read at its pause, half of it, the agent blamed
    misspelt = rows["a busy sign misspelt"]["runs"][0]["failures"]
    assert any("the widget's busy sign '#typnig' (done.hidden) matched no element while the agent answered: is "
               "the selector right?" in str(failure) for failure in misspelt), misspelt
    # the page's own failures are on the run's timeline, and in the turn's reason when nothing answered
    thrown = rows["a script that throws"]["runs"][0]["failures"]
    assert any("the page's script failed meanwhile: undefinedFunctionCall is not defined" in str(failure)
               for failure in thrown), thrown
    result = json.loads((run_dir / "done" / "a-script-that-throws" / "run-1" / "result.json").read_text())
    assert [e["data"]["message"] for e in result["events"] if e["name"] == "page_error"] == [
        "undefinedFunctionCall is not defined"]
    result = json.loads((run_dir / "done" / "a-page-that-is-not-there" / "run-1" / "result.json").read_text())
    assert [e["data"]["status"] for e in result["events"] if e["name"] == "page_status"] == [404]
    for test_dir in ("three-answers-each-marked-by-a-new-button", "three-answers-each-marked-by-one-line-shown-again",
                     "a-sign-hidden-and-shown-again-at-once"):
        result = json.loads((run_dir / "done" / test_dir / "run-1" / "result.json").read_text())
        said = [turn["agent"]["text"] for turn in result["turns"]]
        # only the assistant's messages, one per turn, each read whole
        assert said == [f"You asked: {fruit}. That is all about {fruit}." for fruit in ("pears", "plums", "figs")]
    # `.msg` matches the user's bubble too: it was read as the first line of the agent's answer, and timed as its
    # first token; now left out, and said. Each chat turn keeps the page as it was, in the report too
    folder = run_dir / "done" / "a-messages-selector-that-matches-both-sides" / "run-1"
    result = json.loads((folder / "result.json").read_text())
    assert [turn["agent"]["text"] for turn in result["turns"]] == [
        f"You asked: {fruit}. That is all about {fruit}." for fruit in ("pears", "plums")]
    assert all(turn["agent"]["first_token_at_ms"] is None for turn in result["turns"])
    own = [e["data"] for e in result["events"] if e["name"] == "chat_own_message"]
    assert [e["dropped"] for e in own] == ["pears", "plums"] and "narrow the selector" in own[0]["hint"], own
    assert [turn["agent"]["response"]["screenshot"] for turn in result["turns"]] == [
        "steps/chat-01.jpg", "steps/chat-02.jpg"]
    assert (folder / "steps" / "chat-02.jpg").stat().st_size > 1000
    failed = json.loads((run_dir / "done" / "a-busy-sign-misspelt" / "run-1" / "result.json").read_text())
    assert failed["turns"][0]["agent"]["response"]["screenshot"] == "steps/chat-01.jpg", failed["turns"]
    assert 'alt="the page after this turn"' in (run_dir / "report.html").read_text()
