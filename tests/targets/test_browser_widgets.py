"""Chat widgets and pages as real sites have them, each written for its test and served by
tests/agents/web_pages.py, driven in Debian's Chromium (one shared by the session, attached over CDP)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_fixtures import ROOT, served_pages, shared_chromium, skip_without_browser
from conftest import run_tamesu, why
from model_servers import OpenAIServer, tool_call

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]
FIXTURES = (shared_chromium,)

_PAGES = {
    # the user's words go to the widget's backend, which streams them back; the bodies come in several types
    "echo.html": """<!doctype html><html><body><div id="log"></div>
<form id="f"><input id="q"><button>Send</button></form>
<script>
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  const sizes = [];
  for (const type of ["text/event-stream", "application/javascript", "application/octet-stream"]) {
    const response = await fetch("/echo?t=" + encodeURIComponent(type) + "&m=" + encodeURIComponent(asked));
    sizes.push((await response.text()).length);
  }
  const reply = document.createElement("div");
  reply.className = "msg agent";
  reply.textContent = "got " + sizes.length + " answers";
  document.getElementById("log").append(reply);
});
</script></body></html>""",
    # the assistant's bubble is added empty at once and written into later, as most streaming widgets do
    "bubble.html": """<!doctype html><html><body><div id="log"></div>
<form id="f"><input id="q"><button>Send</button></form>
<script>
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  const reply = document.createElement("div");
  reply.className = "msg agent";
  reply.setAttribute("role", "article");
  reply.setAttribute("aria-label", "assistant");
  document.getElementById("log").append(reply);
  await new Promise((resolve) => setTimeout(resolve, 4000));
  reply.textContent = "About " + asked + ": yes.";
});
</script></body></html>""",
    # behind a launcher; once open, it greets after a moment: longer than done.quiet. Each answer comes 3.5 s after
    # the words: read by its quiet alone, the greeting's turn ends 0.4 s after the greeting (and a poll and a
    # round trip later), which must be before the answer comes, and the first words must be typed before the
    # greeting (with 0.7 s and 1.2 s a loaded machine had some 0.1 s either way)
    "greets.html": """<!doctype html><html><body><button id="open">Chat</button>
<div id="widget" hidden><div id="log"></div><p id="typing" hidden>typing...</p>
<form id="f"><input id="q"><button>Send</button></form></div>
<script>
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (text) => {
  const div = document.createElement("div");
  div.className = "msg agent";
  div.textContent = text;
  document.getElementById("log").append(div);
};
document.getElementById("open").addEventListener("click", async () => {
  document.getElementById("widget").hidden = false;
  document.getElementById("open").hidden = true;
  await sleep(1500);
  say("Hi! I am the shop's assistant.");
});
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value, typing = document.getElementById("typing");
  input.value = "";
  input.disabled = true;  // as many widgets do while the agent answers
  typing.hidden = false;
  await sleep(3500);
  say("Answer to " + asked + ".");
  typing.hidden = true;
  input.disabled = false;
});
</script></body></html>""",
    # as greets.html, but its input stays enabled while it answers, slower than its greeting comes and each answer
    # slower than the one before (4.5 s, 6 s, 7.5 s after its words, as an agent whose context grows): turn 1 is
    # typed before the greeting (2 s), each turn after it some 0.5 s after the message before comes, and so 2 s or
    # more before the next. Read a turn late, the last answer comes 1.5 s later than the one before took: past
    # that time and done.quiet, where the last look ended, and 1.9 s before it ends now (6 s and half again)
    "greets-late.html": """<!doctype html><html><body><button id="open">Chat</button>
<div id="widget" hidden><div id="log"></div><form id="f"><input id="q"><button>Send</button></form></div>
<script>
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (text) => {
  const div = document.createElement("div");
  div.className = "msg agent";
  div.textContent = text;
  document.getElementById("log").append(div);
};
document.getElementById("open").addEventListener("click", async () => {
  document.getElementById("widget").hidden = false;
  document.getElementById("open").hidden = true;
  await sleep(2000);
  say("Hi! I am the shop's assistant.");
});
const delays = [4500, 6000, 7500];
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value;
  input.value = "";
  await sleep(delays.shift());
  say("Answer to " + asked + ".");
});
</script></body></html>""",
    # a long page whose last line is what a rubric asks about
    "long.html": "<!doctype html><html><body><h1>Terms</h1><p>"
                 + " ".join(f"clause{i}" for i in range(2000)) + "</p><footer>Shipping is free.</footer></body></html>",
    # the widget in an iframe from another origin (localhost for the page's 127.0.0.1), as vendors' widgets are
    "host.html": """<!doctype html><html><body><h1>Shop</h1><iframe title="Chat" width="400" height="300"></iframe>
<script>document.querySelector("iframe").src = location.href.replace("127.0.0.1", "localhost")
  .replace("host.html", "framed.html");</script></body></html>""",
    "framed.html": """<!doctype html><html><body><div id="log"></div><p id="typing" hidden>typing...</p>
<form id="f"><input id="q"><button>Send</button></form>
<script>
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("q"), asked = input.value, typing = document.getElementById("typing");
  input.value = "";
  typing.hidden = false;
  await new Promise((resolve) => setTimeout(resolve, 300));
  const reply = document.createElement("div");
  reply.className = "msg agent";
  reply.textContent = "From the frame: " + asked + ".";
  document.getElementById("log").append(reply);
  typing.hidden = true;
});
</script></body></html>""",
    # a widget whose backend is down: it logs, calls, and shows nothing (a missing picture is no failure of its)
    "down.html": """<!doctype html><html><body><div id="log"></div><img src="missing.png" alt="">
<form id="f"><input id="q"><button>Send</button></form>
<script>
console.error("chat: no API key configured");
document.getElementById("f").addEventListener("submit", async (event) => {
  event.preventDefault();
  await fetch("/api/chat", {method: "POST", body: document.getElementById("q").value}).catch(() => null);
  await fetch(new URLSearchParams(location.search).get("status")).catch(() => null);
});
</script></body></html>""",
    # there at once, but a picture that never comes keeps its load event from firing
    # (its script's call that never answers holds up nothing)
    "stalled.html": '<!doctype html><html><body><h1>Shop</h1><script>fetch("hang-poll")</script>'
                    '<img src="hang.png" alt=""></body></html>',
    # a page for signed-in users only: anyone else is sent to sign in
    "account.html": '<!doctype html><html><body><script>location.replace("signin.html")</script></body></html>',
    "signin.html": '<!doctype html><html><body><h1>Sign in</h1><input id="user"></body></html>',
    # what the page shows comes from an iframe of another origin (an order widget)
    "embeds.html": """<!doctype html><html><body><h1>Your account</h1><iframe title="Orders"></iframe>
<script>document.querySelector("iframe").src = location.href.replace("127.0.0.1", "localhost")
  .replace("embeds.html", "embedded.html");</script></body></html>""",
    "embedded.html": '<!doctype html><html><body><p>Your order ORD-1001 has shipped.</p></body></html>',
    "chatty.html": '<!doctype html><html><body><h1>Chatty</h1><script>for (let i = 1; i <= 25; i++) '
                   'console.error("error " + i);</script></body></html>',
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The pages above under tests/agents/web_pages.py on a free port; its base URL."""
    skip_without_browser()
    with served_pages(tmp_path_factory.mktemp("pages"), _PAGES) as url:
        yield url


def _run(tmp_path: Path, suite: str, pages: str, cdp: str, env: dict[str, str] | None = None, parallel: int = 1
         ) -> tuple[subprocess.CompletedProcess[str], Path]:
    # `parallel`: a suite's tests that mostly wait on their pages' clocks run side by side (the browser group is the
    # last lane of `make test`)
    (tmp_path / "suite.yaml").write_text(suite)
    done = run_tamesu(["run", "suite.yaml", "--out", "out", "--parallel", str(parallel)], cwd=tmp_path,
                      env={"PAGES": pages, "TAMESU_BROWSER_CDP_URL": cdp, **(env or {})})
    return done, next((tmp_path / "out").iterdir())


def _rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {row["test"]: row for row in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def _result(run_dir: Path, test_dir: str) -> dict[str, Any]:
    return json.loads((run_dir / "suite" / test_dir / "run-1" / "result.json").read_text())


def test_a_secret_the_widgets_backend_streams_back_is_masked_in_every_file_of_the_trace(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """The trace keeps each response body as a file named by its type: an event stream (`.dat`), a script (`.js`),
    bytes (`.bin`) kept the secret the user typed, unmasked (only `.json`, `.txt`, `.html` were masked)."""
    secret = "zq9-widget-secret-7788"
    done, run_dir = _run(tmp_path, """
targets:
  widget:
    type: browser
    url: "{{env.PAGES}}echo.html"
    chat: { input: "#q", messages: ".msg.agent" }
tests:
  - name: a key typed into the widget
    target: widget
    scenario: { script: [{ say: "my key is {{secrets.WIDGET_KEY}}" }] }
    assert: [{ contains: got 3 answers }]
""", pages, shared_chromium, {"WIDGET_KEY": secret})
    assert done.returncode == 0, done.stdout + done.stderr
    folder = run_dir / "suite" / "a-key-typed-into-the-widget" / "run-1"
    with zipfile.ZipFile(folder / "trace.zip") as trace:
        names = trace.namelist()
        assert any(name.endswith(".dat") for name in names), names  # the event stream's body is in the trace
        leaked = [name for name in names if secret.encode() in trace.read(name)]
    assert leaked == []
    assert all(secret.encode() not in path.read_bytes() for path in folder.rglob("*") if path.is_file())
    # its answer was read in its turn: the look for a late last answer ends a second or so after it, never at the
    # 60 s turn_timeout that bounds it
    assert json.loads((folder / "result.json").read_text())["duration_ms"] < 30_000


def test_an_empty_bubble_the_widget_writes_into_later_is_no_first_token(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """time_to_first_token_ms was the empty bubble's arrival (tens of ms), not the answer's (4 s later: 2 s on each
    side of the impatient target's turn_timeout, where 1.5 s and 1 s left a loaded machine 0.5 s)."""
    done, run_dir = _run(tmp_path, """
targets:
  css:
    type: browser
    url: "{{env.PAGES}}bubble.html"
    chat: { input: "#q", messages: ".msg.agent" }
  role:
    type: browser
    url: "{{env.PAGES}}bubble.html"
    chat: { input: "#q", messages: { role: article, name: assistant } }
  impatient:
    type: browser
    url: "{{env.PAGES}}bubble.html"
    turn_timeout: 2
    chat: { input: "#q", messages: ".msg.agent" }
tests:
  - { name: css, target: css, scenario: { script: [{ say: pears }] }, assert: [{ contains: "About pears: yes." }] }
  - { name: role, target: role, scenario: { script: [{ say: pears }] }, assert: [{ contains: "About pears: yes." }] }
  - { name: impatient, target: impatient, scenario: { script: [{ say: pears }] } }
""", pages, shared_chromium, parallel=3)
    rows = _rows(run_dir)
    # read at once, the answer was "" ("the agent said nothing"), timed at the empty bubble
    assert {test: row["status"] for test, row in rows.items()} == {
        "css": "passed", "role": "passed", "impatient": "failed"}, [why(row) for row in rows.values()]
    for test in ("css", "role"):
        metrics = _result(run_dir, test)["metrics"]
        assert metrics["time_to_first_token_ms"] >= 3900, (test, metrics)
    assert "the agent wrote no message in the widget within 2s ('.msg.agent' matches 1 more, with nothing written " \
           "in it)" in str(rows["impatient"]["runs"][0]["failures"]), done.stdout


def test_a_widget_that_greets_once_open_has_its_greeting_as_the_first_turn(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """A greeting written after the launcher opened the widget was read as the first turn's answer; the real answer
    came after that turn was read, went to no turn, and was never said. With `chat.greeting` it is the agent's first
    turn; without it, what no turn read is said (`chat_unread`)."""
    done, run_dir = _run(tmp_path, """
targets:
  greets:
    type: browser
    url: "{{env.PAGES}}greets.html"
    chat: { input: "#q", messages: ".msg.agent", open: "#open", greeting: true, done: { hidden: "#typing" } }
  unsaid:
    type: browser
    url: "{{env.PAGES}}greets.html"
    chat: { input: "#q", messages: ".msg.agent", open: "#open" }
tests:
  - name: greets
    target: greets
    scenario: { script: [{ say: one }, { say: two }] }
    assert:
      - { contains: "Hi! I am the shop's assistant.", on_turn: 1 }
      - { contains: "Answer to one.", on_turn: 2 }
      - { contains: "Answer to two.", on_turn: 3 }
  - name: unsaid
    target: unsaid
    scenario: { script: [{ say: one }, { say: two }] }
""", pages, shared_chromium, parallel=2)
    rows = _rows(run_dir)
    assert rows["greets"]["status"] == "passed", why(rows["greets"])
    greets = _result(run_dir, "greets")
    assert [turn["agent"]["text"] for turn in greets["turns"]] == [
        "Hi! I am the shop's assistant.", "Answer to one.", "Answer to two."]
    assert greets["turns"][0]["agent"]["response"]["screenshot"] == "steps/chat-01.jpg"
    unsaid = _result(run_dir, "unsaid")
    # the greeting is read as the first answer; the second turn is typed once the widget lets it (after its answer)
    assert [turn["agent"]["text"] for turn in unsaid["turns"]] == ["Hi! I am the shop's assistant.", "Answer to two."]
    unread = [e["data"] for e in unsaid["events"] if e["name"] == "chat_unread"]
    assert [(e["after_turn"], e["messages"]) for e in unread] == [(1, ["Answer to one."])], unsaid["events"]
    assert "set chat.greeting: true" in unread[0]["hint"]
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_late_greeting_that_shifts_every_answer_a_turn_is_said(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """A widget that greets once open, answering slower than its greeting comes and taking the next words while it
    answers, had each answer read one turn late: the greeting as turn 1's, turn 1's as turn 2's..., the last answer
    read by no turn, and nothing said it. Its last answer, slower than the one before (as a loaded machine's lag
    makes it too), came after the last look, watched only done.quiet past the time the answer before took: unsaid
    (the test had raised done.quiet to 1.5 s for it)."""
    done, run_dir = _run(tmp_path, """
targets:
  late:
    type: browser
    url: "{{env.PAGES}}greets-late.html"
    chat: { input: "#q", messages: ".msg.agent", open: "#open" }
tests:
  - name: late
    target: late
    scenario: { script: [{ say: one }, { say: two }, { say: three }] }
""", pages, shared_chromium)
    assert done.returncode == 0, done.stdout + done.stderr
    late = _result(run_dir, "late")
    assert [turn["agent"]["text"] for turn in late["turns"]] == [
        "Hi! I am the shop's assistant.", "Answer to one.", "Answer to two."]
    unread = [e["data"] for e in late["events"] if e["name"] == "chat_unread"]
    assert [(e["after_turn"], e["messages"]) for e in unread] == [(3, ["Answer to three."])], late["events"]
    assert "set chat.greeting: true" in unread[0]["hint"]
    assert "along the way: 1 chat turn followed by widget messages no turn read (a greeting the widget writes late " \
           "reads each answer a turn late: chat.greeting) (chat_unread, 1 test)" in done.stdout, done.stdout


def test_an_expect_on_a_page_longer_than_the_judge_sees_says_the_cut(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """The judge saw the first 8000 characters of the page's text, unsaid: a rubric about its end failed, the page
    blamed, though `assert_text` finds the words."""
    (tmp_path / "rules.yaml").write_text("""
rules:
  - rubric: "shipping is free"
    transcript: "Shipping is free"
    pass: true
    reason: "The footer says shipping is free."
  - rubric: "shipping is free"
    transcript: '[(]cut: the first 8000 of \\d+ characters of the page text are shown[)]'
    pass: false
    reason: "The part of the page shown says nothing of shipping."
  - rubric: "shipping is free"
    pass: false
    reason: "Nothing on the page says shipping is free."
""")
    done, run_dir = _run(tmp_path, """
models:
  judge: { provider: fake, rules: rules.yaml }
targets:
  terms: { type: browser, url: "{{env.PAGES}}long.html" }
tests:
  - name: terms
    target: terms
    steps:
      - { action: assert_text, text: Shipping is free. }
      - expect: "the page says shipping is free"
""", pages, shared_chromium)
    assert done.returncode == 1, done.stdout + done.stderr
    failures = str(_rows(run_dir)["terms"]["runs"][0]["failures"])
    assert re.search(r'expect "the page says shipping is free" did not hold: The part of the page shown says nothing '
                     r"of shipping\. \(the judge saw only the first 8000 of \d+ characters of the page text and "
                     r"the first 12000 of \d+ characters of the aria snapshot\)",
                     failures), failures
    step = _result(run_dir, "terms")["turns"][1]["agent"]["response"]
    assert [re.sub(r"\d+ characters", "N characters", cut) for cut in step["cut"]] == [
        "the first 8000 of N characters of the page text", "the first 12000 of N characters of the aria snapshot"]


def test_a_storage_state_that_is_not_one_is_a_suite_error_where_it_is_named(tmp_path: Path) -> None:
    """A storage state Playwright cannot read passed `validate`, then was an infrastructure error of every test
    (exit 3) with Playwright's message over two lines."""
    skip_without_browser()
    (tmp_path / "cut.json").write_text('{"cookies": [], "origins": [\n')
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "nodomain.json").write_text('{"cookies": [{"name": "sid", "value": "1"}]}')
    (tmp_path / "signed-in.json").write_text((ROOT / "examples" / "web-shop" / "signed-in.json").read_text())
    (tmp_path / "suite.yaml").write_text("""
targets:
  cut: { type: browser, url: "http://127.0.0.1:1/", storage_state: cut.json }
  list: { type: browser, url: "http://127.0.0.1:1/", storage_state: list.json }
  nodomain: { type: browser, url: "http://127.0.0.1:1/", storage_state: nodomain.json }
  good: { type: browser, url: "http://127.0.0.1:1/", storage_state: signed-in.json }
tests:
  - { name: cut, target: cut, steps: [{ action: wait, ms: 1 }] }
  - { name: list, target: list, steps: [{ action: wait, ms: 1 }] }
  - { name: nodomain, target: nodomain, steps: [{ action: wait, ms: 1 }] }
  - { name: good, target: good, steps: [{ action: wait, ms: 1 }] }
""")
    for command in ("validate", "run"):
        done = run_tamesu([command, "suite.yaml", "--out", "out"] if command == "run" else [command, "suite.yaml"],
                          cwd=tmp_path)
        said = done.stdout + done.stderr
        assert done.returncode == 2, said
        assert [line for line in said.splitlines() if "storage_state" in line] == [
            "suite.yaml:3:68: targets.cut.storage_state: cut.json is not a Playwright storage state: line 2, "
            "column 1: Expecting value",
            "suite.yaml:4:69: targets.list.storage_state: list.json is not a Playwright storage state: it holds a "
            "JSON list, not an object with cookies and origins",
            "suite.yaml:5:73: targets.nodomain.storage_state: nodomain.json is not a Playwright storage state: "
            "cookies[0] (sid) needs a domain or a url"], said


def test_a_widget_in_an_iframe_from_another_origin_is_talked_to_through_chat_frame(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """A widget in an iframe could not be reached at all ("the chat input '#q' is not there to type in")."""
    done, run_dir = _run(tmp_path, """
targets:
  framed:
    type: browser
    url: "{{env.PAGES}}host.html"
    chat: { frame: "iframe[title=Chat]", input: "#q", messages: ".msg.agent", done: { hidden: "#typing" } }
  unframed:
    type: browser
    url: "{{env.PAGES}}host.html"
    step_timeout: 1
    chat: { input: "#q", messages: ".msg.agent" }
  misframed:
    type: browser
    url: "{{env.PAGES}}host.html"
    step_timeout: 1
    chat: { frame: "h1", input: "#q", messages: ".msg.agent" }
tests:
  - name: framed
    target: framed
    scenario: { script: [{ say: pears }, { say: plums }] }
    assert:
      - { contains: "From the frame: pears.", on_turn: 1 }
      - { contains: "From the frame: plums.", on_turn: 2 }
  - { name: unframed, target: unframed, scenario: { script: [{ say: pears }] } }
  - { name: misframed, target: misframed, scenario: { script: [{ say: pears }] } }
""", pages, shared_chromium)
    rows = _rows(run_dir)
    assert {test: row["status"] for test, row in rows.items()} == {
        "framed": "passed", "unframed": "failed", "misframed": "failed"}, [why(row) for row in rows.values()]
    assert [turn["agent"]["text"] for turn in _result(run_dir, "framed")["turns"]] == [
        "From the frame: pears.", "From the frame: plums."]
    assert "the chat input '#q' is not there to type in (the page has 1 iframe: a widget in one needs chat.frame)" \
        in str(rows["unframed"]["runs"][0]["failures"])
    assert "the chat frame 'h1' is not an iframe" in str(rows["misframed"]["runs"][0]["failures"])
    assert done.returncode == 1


def test_steps_reach_into_an_iframe_through_their_frame(tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """Only a chat widget could be reached in an iframe (chat.frame): an action step's selector looked in the page
    alone ("fill: nothing matches '#q' within 1s"), so a form or widget in an iframe could not be driven by steps."""
    done, run_dir = _run(tmp_path, """
targets:
  host: { type: browser, url: "{{env.PAGES}}host.html" }
  quick: { type: browser, url: "{{env.PAGES}}host.html", step_timeout: 1 }
tests:
  - name: framed
    target: host
    steps:
      - { action: fill, frame: "iframe[title=Chat]", selector: "#q", value: pears }
      - { action: click, frame: "iframe[title=Chat]", selector: { role: button, name: Send } }
      - { action: wait, frame: "iframe[title=Chat]", text: "From the frame: pears." }
      - { action: assert_text, frame: "iframe[title=Chat]", selector: ".msg.agent", text: "pears" }
      - { action: eval_js, frame: "iframe[title=Chat]", script: "document.querySelector('.msg.agent').textContent" }
      - { action: press, frame: "iframe[title=Chat]", selector: "#q", key: Enter }
      - { action: screenshot, frame: "iframe[title=Chat]", selector: "#log", name: log }
  - { name: unframed, target: quick, steps: [ { action: fill, selector: "#q", value: pears } ] }
  - { name: misframed, target: quick, steps: [ { action: click, frame: "h1", selector: "#q" } ] }
  - { name: no such frame, target: quick, steps: [ { action: click, frame: "iframe[title=Pay]", selector: "#q" } ] }
""", pages, shared_chromium)
    rows = _rows(run_dir)
    assert {test: row["status"] for test, row in rows.items()} == {
        "framed": "passed", "unframed": "failed", "misframed": "failed", "no such frame": "failed"}, \
        [why(row) for row in rows.values()]
    turns = _result(run_dir, "framed")["turns"]
    assert turns[4]["agent"]["raw"][0]["result"] == "From the frame: pears."
    assert (run_dir / "suite" / "framed" / "run-1" / "screenshots" / "log.png").is_file()
    failures = {test: str(row["runs"][0]["failures"]) for test, row in rows.items()}
    assert "step 1: fill: nothing matches '#q' within 1s (the page has 1 iframe: an element in one needs the " \
           "step's frame)" in failures["unframed"], failures
    assert "step 1: click: the frame 'h1' is not an iframe" in failures["misframed"], failures
    assert "step 1: click: the frame 'iframe[title=Pay]' is not in the page within 1s" in failures["no such frame"]
    assert done.returncode == 1


def test_a_frame_on_a_step_with_nothing_to_look_for_in_it_is_refused_where_written(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text("""
targets: { page: { type: browser, url: "http://127.0.0.1:9/" } }
tests:
  - { name: nav, target: page, steps: [ { action: navigate, url: "http://127.0.0.1:9/a", frame: "iframe" } ] }
  - { name: key, target: page, steps: [ { action: press, key: Enter, frame: "iframe" } ] }
""")
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert ("suite.yaml:4:97: tests[0].steps[0].frame: navigate is not done inside an iframe (frame applies to "
            "click, fill, press, wait, assert_text, screenshot, eval_js)") in said, said
    assert "tests[1].steps[0].frame: press without a selector presses the key wherever the focus is" in said, said


def test_a_widget_whose_backend_fails_says_so_in_the_turn_and_on_the_timeline(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """Only uncaught script errors were recorded: a widget whose backend answered 501, or could not be reached, and
    that logged why, failed with "the agent wrote no message" and nothing else."""
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        status = f"http://127.0.0.1:{closed.getsockname()[1]}/status"
    done, run_dir = _run(tmp_path, """
targets:
  down:
    type: browser
    url: "{{env.PAGES}}down.html?status={{env.STATUS}}"
    turn_timeout: 2
    chat: { input: "#q", messages: ".msg.agent" }
tests:
  - { name: down, target: down, scenario: { script: [{ say: pears }] } }
""", pages, shared_chromium, {"STATUS": status})
    assert done.returncode == 1, done.stdout + done.stderr
    failures = str(_rows(run_dir)["down"]["runs"][0]["failures"])
    assert f"the agent wrote no message in the widget within 2s ('.msg.agent' still matches 0); the page's request " \
           f"POST {pages}api/chat failed meanwhile: 501 Unsupported method ('POST')" in failures, failures
    events = _result(run_dir, "down")["events"]
    assert [e["data"]["message"] for e in events if e["name"] == "page_console_error"] == [
        "chat: no API key configured"]
    failed = [(e["data"]["method"], e["data"]["url"], e["data"]["failure"]) for e in events
              if e["name"] == "page_request_failed"]
    assert failed == [("POST", f"{pages}api/chat", "501 Unsupported method ('POST')"),
                      ("GET", status, "net::ERR_CONNECTION_REFUSED")], failed


def test_a_chat_selector_that_matches_several_elements_fails_the_turn_in_one_line(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """A launcher selector matching two buttons was an internal error (exit 3, a traceback); a send or input one was
    Playwright's "strict mode violation" line, cut before its list of elements."""
    done, run_dir = _run(tmp_path, """
targets:
  launchers:
    type: browser
    url: "{{env.PAGES}}greets.html"
    chat: { input: "#q", messages: ".msg.agent", open: "button" }
  sends:
    type: browser
    url: "{{env.PAGES}}greets.html"
    chat: { input: "#q", messages: ".msg.agent", open: "#open", send: "button, form" }
  inputs:
    type: browser
    url: "{{env.PAGES}}greets.html"
    chat: { input: "input, #open", messages: ".msg.agent", open: "#open" }
tests:
  - { name: launchers, target: launchers, scenario: { script: [{ say: pears }] } }
  - { name: sends, target: sends, scenario: { script: [{ say: pears }] } }
  - { name: inputs, target: inputs, scenario: { script: [{ say: pears }] } }
""", pages, shared_chromium)
    rows = _rows(run_dir)
    assert {test: row["status"] for test, row in rows.items()} == {
        "launchers": "failed", "sends": "failed", "inputs": "failed"}, [why(row) for row in rows.values()]
    assert done.returncode == 1, done.stdout + done.stderr
    said = {test: str(row["runs"][0]["failures"]) for test, row in rows.items()}
    assert "before the first turn: the chat launcher 'button' matches 2 elements; make it match one" \
        in said["launchers"], said
    assert "turn 1: the chat send control 'button, form' matches 3 elements; make it match one" in said["sends"], said
    assert "turn 1: the chat input 'input, #open' matches 2 elements; make it match one" in said["inputs"], said


def test_a_page_that_never_finishes_loading_says_what_it_waits_for(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """"did not load within 2s" said nothing of whether the server sent no page or the page waited on a picture."""
    done, run_dir = _run(tmp_path, """
targets:
  stalled: { type: browser, url: "{{env.PAGES}}stalled.html", load_timeout: 2 }
  silent: { type: browser, url: "{{env.PAGES}}hang", load_timeout: 2 }
tests:
  - { name: stalled, target: stalled, steps: [{ action: assert_text, text: Shop }] }
  - { name: silent, target: silent, steps: [{ action: assert_text, text: Shop }] }
""", pages, shared_chromium)
    assert done.returncode == 3, done.stdout + done.stderr
    errors = {test: row["runs"][0]["error"] for test, row in _rows(run_dir).items()}
    assert errors == {
        "stalled": f"browser target stalled: {pages}stalled.html did not load within 2s (the page came; its load "
                   f"event waits for 1 request: {pages}hang.png)",
        "silent": f"browser target silent: {pages}hang did not load within 2s (the server sent no page)"}, errors


def test_a_step_or_turn_that_finds_nothing_says_where_the_page_is(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """A page that sent the browser to sign in (a storage state that expired) failed with "nothing matches '#q'", and
    nothing said the page was not the one the test was written for."""
    done, run_dir = _run(tmp_path, """
targets:
  steps: { type: browser, url: "{{env.PAGES}}account.html", step_timeout: 1 }
  widget:
    type: browser
    url: "{{env.PAGES}}account.html"
    step_timeout: 1
    chat: { input: "#q", messages: ".msg.agent" }
tests:
  - { name: steps, target: steps, steps: [{ action: fill, selector: "#q", value: pears }] }
  - { name: widget, target: widget, scenario: { script: [{ say: pears }] } }
""", pages, shared_chromium)
    assert done.returncode == 1, done.stdout + done.stderr
    said = {test: str(row["runs"][0]["failures"]) for test, row in _rows(run_dir).items()}
    assert f"step 1: fill: nothing matches '#q' within 1s (the page is at {pages}signin.html)" in said["steps"], said
    assert f"turn 1: the chat input '#q' is not there to type in (the page is at {pages}signin.html)" \
        in said["widget"], said


def test_a_visual_of_an_element_says_a_selector_that_matches_several_or_none(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """`visual` with a selector said Playwright's strict-mode line cut before its list, or "timed out", where the
    `screenshot` action says what its selector matched."""
    done, run_dir = _run(tmp_path, """
targets:
  page: { type: browser, url: "{{env.PAGES}}greets.html", step_timeout: 1 }
tests:
  - { name: several, target: page, steps: [{ action: visual, name: send, selector: button }] }
  - { name: none, target: page, steps: [{ action: visual, name: send, selector: "#nope" }] }
""", pages, shared_chromium)
    assert done.returncode == 1, done.stdout + done.stderr
    said = {test: str(row["runs"][0]["failures"]) for test, row in _rows(run_dir).items()}
    assert "step 1: visual: 'button' matches 2 elements; make it match one" in said["several"], said
    assert f"step 1: visual: nothing matches '#nope' within 1s (the page is at {pages}greets.html)" \
        in said["none"], said


def test_a_long_eval_js_value_is_cut_in_the_transcript_saying_so(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """The step's line in the transcript was the value's first 500 characters, with nothing saying it was cut."""
    done, run_dir = _run(tmp_path, """
targets:
  page: { type: browser, url: "{{env.PAGES}}greets.html" }
tests:
  - name: long
    target: page
    steps: [{ action: eval_js, script: "'x'.repeat(2000)" }]
""", pages, shared_chromium)
    assert done.returncode == 0, done.stdout + done.stderr
    agent = _result(run_dir, "long")["turns"][0]["agent"]
    assert agent["response"]["result"] == "x" * 2000
    said = agent["text"]
    assert said == '"' + "x" * 499 + "… (cut: 500 of 2002 characters shown; the whole value is $.result)", said


def test_the_judge_and_the_browser_agent_see_what_the_pages_iframes_hold(
        tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """The page's text and aria snapshot held `- iframe` and nothing of it: an expect about an embedded widget
    failed, the page blamed, and the browser agent never saw it."""
    (tmp_path / "rules.yaml").write_text("""
rules:
  - when: 'goal: Find out whether the order shipped[\\s\\S]*ORD-1001 has shipped'
    tool_calls: [{ name: done, args: { summary: "The order ORD-1001 has shipped" } }]
  - when: 'goal: Find out whether the order shipped'
    tool_calls: [{ name: give_up, args: { reason: "no order is shown" } }]
  - rubric: "the order has shipped"
    transcript: "ORD-1001 has shipped"
    pass: true
    reason: "The orders widget says ORD-1001 has shipped."
  - rubric: "the order has shipped"
    pass: false
    reason: "Nothing on the page says the order shipped."
""")
    done, run_dir = _run(tmp_path, """
models:
  browser: { provider: fake, rules: rules.yaml }
  judge: { provider: fake, rules: rules.yaml }
targets:
  account: { type: browser, url: "{{env.PAGES}}embeds.html" }
tests:
  - name: account
    target: account
    steps:  # the page's load waits for the iframe its script made while the page was read
      - goal: Find out whether the order shipped
        max_steps: 2
      - expect: the order has shipped
""", pages, shared_chromium)
    assert done.returncode == 0, done.stdout + done.stderr
    turns = _result(run_dir, "account")["turns"]
    assert turns[0]["agent"]["response"]["summary"] == "The order ORD-1001 has shipped"
    assert turns[1]["agent"]["response"]["reason"] == "The orders widget says ORD-1001 has shipped."


def test_the_browser_agent_acts_inside_an_iframe_through_the_frame_it_is_shown(
        tmp_path: Path, pages: str, shared_chromium: str, serve: Any) -> None:
    """The browser agent saw an iframe's content, told "the steps' selectors do not reach into it", and its tools
    had no `frame`: a goal on a widget or form in an iframe could not be reached, though steps can act there."""
    model = OpenAIServer()
    server = serve(model.app)
    frame = 'iframe[title="Chat"]'
    model.plan(tool_call("fill", {"selector": "#q", "value": "pears", "frame": frame}),
               tool_call("click", {"selector": {"role": "button", "name": "Send"}, "frame": frame}),
               tool_call("wait", {"text": "From the frame: pears.", "frame": frame}),
               tool_call("done", {"summary": "The widget answered about pears"}))
    done, run_dir = _run(tmp_path, f"""
models:
  browser: {{ provider: openai, model: test-model, base_url: "{OpenAIServer.base_url(server.url)}", api_key: k }}
targets:
  shop: {{ type: browser, url: "{{{{env.PAGES}}}}host.html", step_timeout: 3s }}
tests:
  - name: ask the widget
    target: shop
    steps:
      - {{ action: wait, frame: '{frame}', selector: "#q" }}
      - goal: Ask the chat widget about pears
        max_steps: 4
""", pages, shared_chromium)
    assert done.returncode == 0, done.stdout + done.stderr
    requests = [call.body for call in model.calls()]
    tools = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in requests[0]["tools"]}
    assert {name for name, properties in tools.items() if "frame" in properties} == {
        "click", "fill", "press", "wait", "eval_js", "assert_text", "screenshot"}
    assert "frame" in requests[0]["messages"][0]["content"]
    page = requests[0]["messages"][-1]["content"]
    assert f"(act in it with frame: {frame}):" in page, page
    said = [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert said == ["ok: filled '#q'", "ok: clicked button 'Send'", 'ok: "From the frame: pears." is visible'
                    ], said
    goal = _result(run_dir, "ask-the-widget")["turns"][1]["agent"]["response"]
    assert goal["reached"] and goal["prompt_version"] == "browser_agent.v2", goal


def test_a_page_with_more_errors_than_are_kept_says_so(tmp_path: Path, pages: str, shared_chromium: str) -> None:
    """The first 20 of each kind of the page's own failures are kept: the rest went without a word."""
    done, run_dir = _run(tmp_path, """
targets:
  page: { type: browser, url: "{{env.PAGES}}chatty.html" }
tests:
  - { name: chatty, target: page, steps: [{ action: assert_text, text: Chatty }] }
""", pages, shared_chromium)
    assert done.returncode == 0, done.stdout + done.stderr
    events = _result(run_dir, "chatty")["events"]
    assert [e["data"]["message"] for e in events if e["name"] == "page_console_error"] == [
        f"error {i}" for i in range(1, 21)]
    assert [(e["data"]["kind"], e["data"]["kept"]) for e in events if e["name"] == "page_events_cut"] == [
        ("page_console_error", 20)]


def test_a_browser_agent_answering_in_words_is_quoted_on_one_line(tmp_path: Path, pages: str,
                                                                  shared_chromium: str) -> None:
    """A browser model that answers in words, no tool call: its step said `answered without a tool call: "I'd
    search for it,\\nthen open it"` as a Python repr (its quotes chosen by the apostrophe, the line break as `\\n`)."""
    done, run_dir = _run(tmp_path, r"""
models:
  browser: { provider: fake, rules: [{ say: "I'd search for it,\nthen open it" }] }
targets:
  shop: { type: browser, url: "{{env.PAGES}}host.html", step_timeout: 3s }
tests:
  - name: words
    target: shop
    steps:
      - goal: Find the pears
        max_steps: 1
""", pages, shared_chromium)
    assert done.returncode == 1, done.stdout + done.stderr
    (step,) = _result(run_dir, "words")["turns"][0]["agent"]["raw"][0]["agent_steps"]
    assert step["outcome"] == 'answered without a tool call: "I\'d search for it, then open it"', step
    assert 'step 1: goal "Find the pears" not reached: ' in done.stdout, done.stdout
