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
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    skip_without_browser()
    with served_pages(tmp_path_factory.mktemp("pages"), _PAGES) as url:
        yield url


def _run(tmp_path: Path, suite: str, pages: str, cdp: str) -> tuple[str, dict[str, dict[str, Any]], Path]:
    (tmp_path / "suite.yaml").write_text(suite)
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path,
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
""", pages, shared_chromium)
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
""", pages, shared_chromium)
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
