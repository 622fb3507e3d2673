"""The browser target against the web shop example in Debian's Chromium: the example suites, each failure
with its one line and exit code, suite errors, the replay cache, crashes and no orphaned Chromium.

Most runs attach to one Chromium shared by the whole session (TAMESU_BROWSER_CDP_URL); the process tests
let tamesu start its own, since what they check is that it goes away."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from browser_fixtures import (
    browser_main_process,
    chromium_under,
    example_copy,
    shared_chromium,
    skip_without_browser,
    web_shop_url,
)
from conftest import run_tamesu
from hidden_modules import hiding
from lifeline import alive, tied
from model_servers import OpenAIServer, text, tool_call

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]
FIXTURES = (web_shop_url, shared_chromium)
"""Session fixtures of browser_fixtures, used by name below."""


def _env(shop: str, cdp: str | None = None) -> dict[str, str]:
    env = {"WEB_SHOP_URL": shop}
    if cdp:
        env["TAMESU_BROWSER_CDP_URL"] = cdp
    return env


def _results(out: Path) -> dict[str, dict[str, Any]]:
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {row["test"]: row for row in rows}


def _run_result(out: Path, suite: str, test_dir: str) -> dict[str, Any]:
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    return json.loads((run_dir / suite / test_dir / "run-1" / "result.json").read_text())


def test_the_example_suite_passes_with_steps_artifacts_and_the_widget(
        tmp_path: Path, web_shop_url: str, shared_chromium: str) -> None:
    example = example_copy(tmp_path)
    done = run_tamesu(["run", str(example), "--out", str(tmp_path / "out"), "--report", "html", "--parallel", "3"],
                      cwd=tmp_path, env=_env(web_shop_url, shared_chromium))
    assert done.returncode == 0, done.stdout + done.stderr
    results = _results(tmp_path / "out")
    assert len(results) == 11 and all(r["status"] == "passed" for r in results.values()), results
    goal = _run_result(tmp_path / "out", "web-shop", "find-a-book-by-goal")
    first = goal["turns"][0]["agent"]["response"]
    assert first["reached"] and [s["action"] for s in first["agent_steps"]] == ["fill", "press", "click", "done"]
    assert goal["metrics"]["goal_steps"] == 4
    assert first["prompt_version"] == "browser_agent.v2"
    run_dir = next(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    artifacts = run_dir / "web-shop" / "find-a-book-by-goal" / "run-1"
    assert (artifacts / "steps" / "01-goal-01.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
    assert (artifacts / "steps" / "02-expect.jpg").is_file()
    assert json.loads((artifacts / "network.har").read_text())["log"]["entries"]
    assert (artifacts / "trace.zip").stat().st_size > 1000
    actions = _run_result(tmp_path / "out", "web-shop", "search-add-to-cart-and-check-out")
    assert actions["captured"]["title"] == "Dune · Paper Moon Books"
    shots = run_dir / "web-shop" / "search-add-to-cart-and-check-out" / "run-1" / "screenshots"
    assert (shots / "detail.png").is_file()
    chat = _run_result(tmp_path / "out", "web-shop", "order-status-through-the-chat-widget")
    said = [t["agent"]["text"] for t in chat["turns"]]
    assert "shipped" in said[0] and chat["turns"][0]["user"]["source"] == "simulator"
    counterpart = _run_result(tmp_path / "out", "web-shop", "another-agent-talks-to-the-widget")
    assert [t["user"]["source"] for t in counterpart["turns"]] == ["counterpart", "counterpart"]
    mocked = _run_result(tmp_path / "out", "web-shop", "mocks-with-a-file-and-a-method-and-a-wait-for-a-URL")
    assert [e["data"]["url"].rsplit("/", 1)[-1] for e in mocked["events"] if e["name"] == "browser_mocked"] == \
        ["search?q=anything", "cart"]
    blocked = _run_result(tmp_path / "out", "web-shop", "requests-elsewhere-are-blocked-and-recorded")
    assert [e["data"]["url"] for e in blocked["events"] if e["name"] == "browser_blocked"] == \
        ["http://203.0.113.7/pixel.gif"]
    html = (run_dir / "report.html").read_text()
    assert html.count('<img class="step-shot"') >= 10  # the steps with their screenshots, inline
    assert html.count('<img class="agent-shot"') >= 3  # and each action of the browser agent's goal


EXPECTED_FAILURES = {
    "a goal the shop cannot meet":
        'step 1: goal "Find the novel Ubik and open its page" not reached: the goal was not reached within its '
        "3 steps",
    "a selector that matches nothing": "step 1: click: nothing matches '#nope' within 0.5s",
    "a navigation outside allowed_domains":
        "step 1: navigate: http://203.0.113.7/ is outside allowed_domains (127.0.0.1)",
    # the script only schedules the navigation: on a loaded machine Chromium asks for the page during step 2
    # (the wait), and the failure names the step that was running when the request was blocked
    "a link outside allowed_domains":
        "the page tried to go to http://203.0.113.7/, outside allowed_domains (127.0.0.1)",
    "the checkout with its a11y defect":
        "step 2: a11y: 1 axe violation at or above serious: label (critical, 1 node: #card)",
    "the cart is not the home page": "step 2: visual home: ",
    "an expectation the page does not meet":
        'step 1: expect "The page shows the book Solaris" did not hold: The page does not show Solaris.',
    # the words (the goal, the expectation, the text and what the page says) in double quotes as every line quotes
    # words (they were Python reprs); a selector as written ('h1', '#nope')
    "a text that is not there": """step 1: assert_text: "Ubik" is not in 'h1' within 0.5s (it says "Find a book")""",
    "a script that never finishes": "step 1: eval_js: the script did not finish within 0.5s",
    "a goal whose link leads nowhere":
        'step 1: goal "Visit the closed shop" not reached: the browser agent gave up: the closed shop\'s page does '
        "not load",
}


def test_each_failure_is_one_line_naming_the_step(tmp_path: Path, web_shop_url: str,
                                                  shared_chromium: str) -> None:
    example = example_copy(tmp_path)
    done = run_tamesu(["run", str(example / "failing"), "--out", str(tmp_path / "out"), "--parallel", "3"],
                      cwd=tmp_path, env=_env(web_shop_url, shared_chromium))
    assert done.returncode == 1, done.stdout + done.stderr
    results = _results(tmp_path / "out")
    assert set(results) == set(EXPECTED_FAILURES)
    for name, line in EXPECTED_FAILURES.items():
        assert results[name]["status"] == "failed", name
        step = "" if line.startswith("step ") else r"step [12]: "
        said = [out for out in done.stdout.splitlines() if "✗" in out]
        assert re.search("✗ conversation: " + step + re.escape(line), done.stdout), (line, said)
    assert "Traceback" not in done.stdout + done.stderr
    goal = _run_result(tmp_path / "out", "web-shop-failing", "a-goal-the-shop-cannot-meet")
    steps = goal["turns"][0]["agent"]["raw"][0]["agent_steps"]
    assert [s["action"] for s in steps] == ["fill", "fill", "fill"]  # recorded, each with its screenshot
    assert all(s["screenshot"] for s in steps)
    assert goal["metrics"]["goal_steps"] == 3
    nowhere = _run_result(tmp_path / "out", "web-shop-failing", "a-goal-whose-link-leads-nowhere")
    tried = nowhere["turns"][0]["agent"]["raw"][0]["agent_steps"]
    assert [s["action"] for s in tried] == ["navigate", "give_up"]
    assert tried[0]["outcome"].startswith("failed: browser target shop: http://127.0.0.1:9/ did not load")
    run_dir = next(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert (run_dir / "web-shop-failing" / "the-cart-is-not-the-home-page" / "run-1" / "visual" /
            "home-diff.png").is_file()


def test_a_goal_with_a_real_provider_is_recorded_then_replayed(
        tmp_path: Path, web_shop_url: str, shared_chromium: str, serve: Any) -> None:
    """The browser agent through an OpenAI-compatible server (tool calls on the wire), recorded by the replay
    cache, then replayed with the server stopped."""
    example = example_copy(tmp_path)
    model = OpenAIServer()
    server = serve(model.app)
    model.plan(tool_call("fill", {"selector": {"role": "searchbox", "name": "Search books"}, "value": "solaris"}),
               tool_call("press", {"selector": "#q", "key": "Enter"}),
               tool_call("click", {"selector": {"role": "link", "name": "Solaris"}}),
               tool_call("done", {"summary": "Solaris is open"}))
    (example / "tamesu.yaml").write_text(
        "suites: ['*.tamesu.yaml']\n"
        "cache: { dir: recorded }\n"
        "models:\n"
        f"  browser: {{ provider: openai, model: test-model, base_url: '{OpenAIServer.base_url(server.url)}', "
        "api_key: k, timeout: 5s }\n"
        "  judge: { provider: fake, rules: fake-rules.yaml }\n"
        "  simulator: { provider: fake, rules: fake-rules.yaml }\n"
        "  customer: { provider: fake, rules: customer-rules.yaml }\n")  # the suite's model target names it
    env = _env(web_shop_url, shared_chromium)
    first = run_tamesu(["run", str(example), "--filter", "by goal", "--out", str(tmp_path / "a")],
                       cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stdout
    requests = [c.body for c in model.calls()]
    assert len(requests) == 4
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"click", "fill", "press", "done", "give_up"}
    assert "url: " + web_shop_url in requests[0]["messages"][-1]["content"]
    assert any(m["role"] == "tool" and m["content"].startswith("ok: filled") for m in requests[1]["messages"])
    server.stop()
    replay = run_tamesu(["run", str(example), "--filter", "by goal", "--out", str(tmp_path / "b"),
                         "--cache-only"], cwd=tmp_path, env=env)
    assert replay.returncode == 0, replay.stdout
    assert _run_result(tmp_path / "b", "web-shop", "find-a-book-by-goal")["metrics"]["goal_steps"] == 4


def test_visual_baselines_are_written_with_update_golden(tmp_path: Path, web_shop_url: str,
                                                         shared_chromium: str) -> None:
    example = example_copy(tmp_path)
    (example / "__visual__" / "home.png").unlink()
    env = _env(web_shop_url, shared_chromium)
    missing = run_tamesu(["run", str(example), "--filter", "looks as reviewed", "--out", "o1"], cwd=tmp_path,
                         env=env)
    # a baseline not there yet is the suite's to set up, not the page's failure (it was exit 1, fault: agent; then
    # exit 3, fault: environment, the infrastructure's)
    assert missing.returncode == 2, missing.stdout
    assert "fault: suite" in missing.stdout, missing.stdout
    assert "visual: no baseline __visual__/home.png: run with --update-golden to write it" in missing.stdout
    written = run_tamesu(["run", str(example), "--filter", "looks as reviewed", "--out", "o2", "--update-golden"],
                         cwd=tmp_path, env=env)
    assert written.returncode == 0 and (example / "__visual__" / "home.png").is_file()
    again = run_tamesu(["run", str(example), "--filter", "looks as reviewed", "--out", "o3"], cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout


def _suite(folder: Path, body: str, name: str = "suite.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(body)
    return path


def test_a_page_that_never_loads_is_an_infrastructure_error(tmp_path: Path,
                                                            shared_chromium: str) -> None:
    silent = socket.socket()  # accepts connections and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        _suite(tmp_path, f"""
targets:
  page: {{ type: browser, url: "http://127.0.0.1:{port}/", load_timeout: 1s }}
tests:
  - name: never loads
    target: page
    steps: [{{ action: assert_text, text: hello }}]
""")
        done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path,
                          env={"TAMESU_BROWSER_CDP_URL": shared_chromium})
    finally:
        silent.close()
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"browser target page: http://127.0.0.1:{port}/ did not load within 1s" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(("body", "line"), [
    ("""
targets:
  shop: { type: browser, url: "http://127.0.0.1:1/", engine: firefox }
tests:
  - { name: t, target: shop, steps: [{ action: wait, ms: 1 }] }
""", "suite.yaml:3:62: targets.shop.engine: engine 'firefox' is not available: this version drives chromium only "
        "(Debian's /usr/bin/chromium, or Playwright's)\n"),
    ("""
targets:
  shop: { type: browser, url: "http://127.0.0.1:1/" }
tests:
  - name: t
    target: shop
    steps:
      - { action: click }
""", "suite.yaml:8:9: tests[0].steps[0]: click needs selector"),
    ("""
targets:
  shop: { type: browser, url: "http://127.0.0.1:1/" }
tests:
  - name: t
    target: shop
    steps:
      - { action: hover, selector: "#x" }
""", "suite.yaml:8:19: tests[0].steps[0].action: input should be 'navigate', 'click'"),
    ("""
targets:
  shop: { type: browser, url: "http://127.0.0.1:1/" }
tests:
  - name: t
    target: shop
    steps:
      - goal: "Buy a book"
""", "suite.yaml:8:15: tests[0].steps[0].goal: a goal step is played by tamesu's browser agent: set models.browser"),
    ("""
targets:
  api: { type: rest, url: "http://127.0.0.1:1/" }
tests:
  - name: t
    target: api
    steps: [{ action: wait, ms: 1 }]
""", "suite.yaml:7:12: tests[0].steps: steps are for browser targets; this test's target is rest"),
    ("""
targets:
  shop: { type: browser, url: "http://127.0.0.1:1/" }
tests:
  - name: t
    target: shop
    scenario: { script: [{ say: hi }] }
""", "suite.yaml:5:5: tests[0]: a browser test needs steps (goal, expect, action), or a chat block"),
    ("""
targets:
  shop: { type: browser, url: "http://127.0.0.1:1/", storage_state: nowhere.json }
tests:
  - { name: t, target: shop, steps: [{ action: wait, ms: 1 }] }
""", "suite.yaml:3:69: targets.shop.storage_state: no file nowhere.json (a Playwright storage state, relative to "
     "the suite)"),
])
def test_suite_errors_are_one_line_with_exit_2(tmp_path: Path, body: str, line: str) -> None:
    skip_without_browser()
    _suite(tmp_path, body)
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert line in done.stdout + done.stderr, done.stdout + done.stderr


def test_without_the_extra_a_suite_gets_one_line_naming_it(tmp_path: Path) -> None:
    blocker = hiding(tmp_path, "playwright")
    _suite(tmp_path, """
targets:
  shop: { type: browser, url: "http://127.0.0.1:1/" }
tests:
  - { name: t, target: shop, steps: [{ action: wait, ms: 1 }] }
""")
    done = run_tamesu(["run", "suite.yaml"], cwd=tmp_path,
                      env={"PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("suite.yaml:3:17: targets.shop.type: the browser target needs the browser extra (playwright is not "
            "installed): pip install 'tamesu[browser]'") in done.stdout + done.stderr


def _watch(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], set[int]]:
    full = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **env}
    full.pop("TAMESU_BROWSER_CDP_URL", None)
    process = subprocess.Popen([sys.executable, "-m", "tamesu", *command], cwd=cwd, env=full,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, set()


def _gone(pids: set[int], within: float = 10) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def test_a_browser_crash_mid_test_is_exit_3_and_leaves_no_chromium(tmp_path: Path,
                                                                   web_shop_url: str) -> None:
    _suite(tmp_path, """
targets:
  shop: { type: browser, url: "{{env.WEB_SHOP_URL}}" }
tests:
  - name: a long wait
    target: shop
    steps:
      - { action: wait, selector: "#q" }
      - { action: wait, ms: 60000 }
""")
    process, seen = _watch(["run", "suite.yaml", "--out", "out"], tmp_path, {"WEB_SHOP_URL": web_shop_url})
    deadline = time.monotonic() + 30
    main = None
    while time.monotonic() < deadline and process.poll() is None:
        seen.update(chromium_under(process.pid))
        main = browser_main_process(sorted(seen))
        if main and (tmp_path / "out").exists() and any((tmp_path / "out").rglob("01-wait.*")):
            break
        time.sleep(0.1)
    assert main is not None, "tamesu started no Chromium"
    os.kill(main, signal.SIGKILL)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 3, output
    assert "browser target shop: the browser exited during step 2 (wait)" in output, output
    assert "Traceback" not in output
    assert _gone(seen) == []


def test_a_finished_run_leaves_no_chromium(tmp_path: Path, web_shop_url: str) -> None:
    _suite(tmp_path, """
targets:
  shop: { type: browser, url: "{{env.WEB_SHOP_URL}}" }
tests:
  - { name: one, target: shop, steps: [{ action: assert_text, text: Find a book }] }
  - { name: two, target: shop, steps: [{ action: assert_text, text: Search books }] }
""")
    process, seen = _watch(["run", "suite.yaml", "--out", "out", "--parallel", "2"], tmp_path,
                           {"WEB_SHOP_URL": web_shop_url})
    mains: dict[int, str] = {}
    while process.poll() is None:
        for pid in set(chromium_under(process.pid)) - seen:
            seen.add(pid)
            if browser_main_process([pid]) == pid:
                mains[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")[:300]
        time.sleep(0.05)
    output = process.stdout.read() if process.stdout else ""
    assert process.returncode == 0, output
    assert len(mains) == 1, mains  # one browser served both tests
    assert _gone(seen) == []


def test_secrets_are_masked_in_the_har_and_the_trace(tmp_path: Path, web_shop_url: str,
                                                     shared_chromium: str) -> None:
    _suite(tmp_path, """
targets:
  shop: { type: browser, url: "{{env.WEB_SHOP_URL}}?token={{secrets.SHOP_TOKEN}}" }
tests:
  - { name: with a token, target: shop, steps: [{ action: assert_text, text: Find a book }] }
""")
    secret = "s3cr3t-web-token-41"
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path,
                      env={**_env(web_shop_url, shared_chromium), "SHOP_TOKEN": secret})
    assert done.returncode == 0, done.stdout
    run = next((tmp_path / "out").iterdir()) / "suite" / "with-a-token" / "run-1"
    har = (run / "network.har").read_text()
    assert "token=***" in har and secret not in har
    assert secret.encode() not in (run / "trace.zip").read_bytes()
    with zipfile.ZipFile(run / "trace.zip") as trace:
        assert not any(secret.encode() in trace.read(name) for name in trace.namelist())
    assert all(secret not in p.read_text(errors="replace") for p in run.rglob("*.json"))


def _trace_kinds(run: Path) -> set[str]:
    """The kinds of the records in a run's trace.zip (`frame-snapshot`, `screencast-frame`, `before`...)."""
    with zipfile.ZipFile(run / "trace.zip") as trace:
        lines = [line for name in trace.namelist() if name.endswith(".trace")
                 for line in trace.read(name).decode().splitlines() if line.strip()]
    return {json.loads(line).get("type", "") for line in lines}


def test_the_trace_keeps_the_pages_dom_and_its_screencast_only_when_asked(tmp_path: Path, web_shop_url: str,
                                                                          shared_chromium: str) -> None:
    """Every trace recorded the screencast, a frame at every paint: the web shop example's suite took twice as long
    (49 s against 27 s at load 15), tamesu's own step screenshots waiting behind the frames. The DOM before and
    after each action is in every trace; the screencast only with `trace_screenshots: true`."""
    _suite(tmp_path, """
targets:
  shop: { type: browser, url: "{{env.WEB_SHOP_URL}}" }
  filmed: { type: browser, url: "{{env.WEB_SHOP_URL}}", trace_screenshots: true }
tests:
  - { name: plain, target: shop, steps: [{ action: fill, selector: "#q", value: dune }] }
  - { name: filmed, target: filmed, steps: [{ action: fill, selector: "#q", value: dune }] }
""")
    done = run_tamesu(["run", "suite.yaml", "--out", "out", "--parallel", "2"], cwd=tmp_path,
                      env=_env(web_shop_url, shared_chromium))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = next((tmp_path / "out").iterdir()) / "suite"
    plain, filmed = _trace_kinds(run_dir / "plain" / "run-1"), _trace_kinds(run_dir / "filmed" / "run-1")
    assert {"before", "after", "frame-snapshot"} <= plain and "screencast-frame" not in plain, plain
    assert {"before", "after", "frame-snapshot", "screencast-frame"} <= filmed, filmed


def test_secrets_in_any_response_body_are_masked_in_the_trace(tmp_path: Path, serve: Any,
                                                               shared_chromium: str) -> None:
    """The trace keeps each response body as resources/<sha1>.<ext>: a stylesheet, an XML answer and a script
    that hold the token are masked too (only .json, .html, .txt... were), and the page's PNG is left whole."""
    secret = "s3cr3t-css-token-42"
    png = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4"
           b"\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")
    page = ('<html><head><title>t</title><link rel="stylesheet" href="/s.css"><script src="/a.js"></script></head>'
            '<body><h1>Hello</h1><img src="/p.png"><p id="o"></p><script>fetch("/d.xml").then(r => r.text())'
            '.then(t => { document.getElementById("o").textContent = "loaded" })</script></body></html>')
    app = Starlette(routes=[
        Route("/", lambda _: Response(page, media_type="text/html")),
        Route("/s.css", lambda _: Response(f'h1::after {{ content: "{secret}" }}', media_type="text/css")),
        Route("/a.js", lambda _: Response(f'var token = "{secret}";', media_type="text/javascript")),
        Route("/d.xml", lambda _: Response(f"<token>{secret}</token>", media_type="application/xml")),
        Route("/p.png", lambda _: Response(png, media_type="image/png")),
    ])
    site = serve(app)
    _suite(tmp_path, f"""
targets:
  site: {{ type: browser, url: "{site.url}/?token={{{{secrets.SITE_TOKEN}}}}", allowed_domains: ["127.0.0.1"] }}
tests:
  - {{ name: with a token, target: site, steps: [{{ action: wait, text: loaded }}] }}
""")
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path,
                      env={"TAMESU_BROWSER_CDP_URL": shared_chromium, "SITE_TOKEN": secret})
    assert done.returncode == 0, done.stdout
    run = next((tmp_path / "out").iterdir()) / "suite" / "with-a-token" / "run-1"
    with zipfile.ZipFile(run / "trace.zip") as trace:
        bodies = {name: trace.read(name) for name in trace.namelist() if name.startswith("resources/")}
    kinds = {name.rsplit(".", 1)[-1] for name in bodies}
    assert {"css", "xml", "png"} <= kinds, sorted(bodies)
    assert [name for name, data in bodies.items() if secret.encode() in data] == []
    assert [name for name, data in bodies.items() if name.endswith((".css", ".xml")) and b"***" not in data] == []
    assert png in bodies.values()  # a picture is kept byte for byte


def test_a_killed_tamesu_leaves_no_chromium(tmp_path: Path, web_shop_url: str) -> None:
    """Even SIGKILL: Playwright's driver sees its pipe close and takes the browser with it."""
    _suite(tmp_path, """
targets:
  shop: { type: browser, url: "{{env.WEB_SHOP_URL}}" }
tests:
  - name: a long wait
    target: shop
    steps: [{ action: wait, ms: 60000 }]
""")
    process, seen = _watch(["run", "suite.yaml", "--out", "out"], tmp_path, {"WEB_SHOP_URL": web_shop_url})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and browser_main_process(sorted(seen)) is None:
        seen.update(chromium_under(process.pid))
        time.sleep(0.1)
    assert browser_main_process(sorted(seen)) is not None, "tamesu started no Chromium"
    seen.update(chromium_under(process.pid))
    process.kill()
    process.communicate(timeout=30)
    assert _gone(seen) == []


def test_jsonl_cases_talk_through_the_widget(tmp_path: Path, web_shop_url: str, shared_chromium: str) -> None:
    (tmp_path / "tamesu.yaml").write_text("""
targets:
  widget:
    type: browser
    url: "{{env.WEB_SHOP_URL}}help"
    allowed_domains: ["127.0.0.1"]
    chat:
      input: "#chat-input"
      messages: "#chat-log .msg.agent"
      done: { hidden: "#typing" }
      open: { role: button, name: Chat with us }
""")
    shipped = [{"type": "contains", "value": "shipped"}]
    (tmp_path / "cases.jsonl").write_text(
        json.dumps({"id": "shipped", "input": "Where is my order ORD-1001?", "assert": shipped}) + "\n"
        + json.dumps({"id": "wrong", "input": "Where is my order ORD-1002?", "assert": shipped}) + "\n")
    done = run_tamesu(["test", "-i", "cases.jsonl", "-n", "widget"], cwd=tmp_path,
                      env=_env(web_shop_url, shared_chromium))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Passed:  1" in done.stdout and "Failed:  1" in done.stdout, done.stdout


def test_a_chat_launcher_that_is_not_there_fails_the_test_before_its_first_turn(
        tmp_path: Path, web_shop_url: str, shared_chromium: str) -> None:
    # before: "internal error: TimeoutError: Locator.click: Timeout ..." with a traceback file, exit 3
    (tmp_path / "widget.tamesu.yaml").write_text("""
name: widget
targets:
  widget:
    type: browser
    url: "{{env.WEB_SHOP_URL}}help"
    allowed_domains: ["127.0.0.1"]
    step_timeout: 1s
    chat:
      input: "#chat-input"
      messages: "#chat-log .msg.agent"
      done: { hidden: "#typing" }
      open: { role: button, name: Open chat }
tests:
  - { name: launcher, target: widget, scenario: { script: [ { say: "Where is my order ORD-1001?" } ] } }
""")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path, env=_env(web_shop_url, shared_chromium))
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("before the first turn: the chat launcher button 'Open chat' could not be clicked within "
            "step_timeout (1s)") in done.stdout, done.stdout
    assert "internal error" not in done.stdout + done.stderr


def test_headed_without_a_display_says_so(tmp_path: Path, web_shop_url: str) -> None:
    # before: "/usr/bin/chromium did not start: BrowserType.launch: Target page, context or browser has been closed"
    (tmp_path / "headed.tamesu.yaml").write_text("""
name: headed
targets:
  page: { type: browser, url: "{{env.WEB_SHOP_URL}}", headless: false }
tests:
  - { name: look, target: page, steps: [ { action: assert_text, text: "Paper Moon" } ] }
""")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "TAMESU_BROWSER_CDP_URL")}
    done = subprocess.run(tied([sys.executable, "-m", "tamesu", "run", "--out", "out"]), cwd=tmp_path,
                          env={**env, **_env(web_shop_url), "NO_COLOR": "1"}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "headless: false needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set" in done.stdout, done.stdout


def test_with_vision_the_browser_agent_and_the_judge_see_the_page(
        tmp_path: Path, web_shop_url: str, shared_chromium: str, serve: Any) -> None:
    """`vision: true`: each look at the page goes to the model with a JPEG of the viewport beside its text, the
    newest page only; without it no picture is sent."""
    import base64
    import io

    from PIL import Image

    model = OpenAIServer()
    server = serve(model.app)
    verdict = {"pass": True, "reason": "the shop's home page", "evidence": ["Paper Moon Books"]}
    model.plan(tool_call("click", {"selector": "a[href='/cart']"}),
               tool_call("done", {"summary": "the cart is open"}),
               text(json.dumps(verdict)),
               tool_call("done", {"summary": "nothing to do"}))
    base_url = OpenAIServer.base_url(server.url)
    (tmp_path / "tamesu.yaml").write_text(
        "models:\n"
        f"  browser: {{ provider: openai, model: m, base_url: '{base_url}', api_key: k, timeout: 5s }}\n"
        f"  judge: {{ provider: openai, model: m, base_url: '{base_url}', api_key: k, timeout: 5s }}\n")
    (tmp_path / "seeing.tamesu.yaml").write_text(
        "name: seeing\n"
        "targets:\n"
        "  shop: { type: browser, url: '{{env.WEB_SHOP_URL}}', vision: true, viewport: { width: 800, height: 600 } }\n"
        "  blind: { type: browser, url: '{{env.WEB_SHOP_URL}}' }\n"
        "tests:\n"
        "  - name: seen\n"
        "    target: shop\n"
        "    steps:\n"
        "      - goal: Open the cart\n"
        "      - { action: navigate, url: '{{env.WEB_SHOP_URL}}' }\n"
        "      - expect: The page is the shop's home page\n"
        "  - name: unseen\n"
        "    target: blind\n"
        "    steps:\n"
        "      - goal: Look at the page\n")
    done = run_tamesu(["run", "--parallel", "1", "--out", str(tmp_path / "out")], cwd=tmp_path,
                      env=_env(web_shop_url, shared_chromium))
    assert done.returncode == 0, done.stdout
    calls = [c.body for c in model.calls()]
    assert len(calls) == 4

    def pictures(message: dict[str, Any]) -> list[Image.Image]:
        content = message["content"]
        if isinstance(content, str):
            return []
        found = []
        for part in content:
            if part["type"] == "image_url":
                url = part["image_url"]["url"]
                assert url.startswith("data:image/jpeg;base64,"), url[:40]
                found.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
        return found

    first, second, judged, blind = calls
    [home] = pictures(first["messages"][-1])
    assert home.format == "JPEG" and home.size == (800, 600)
    # the second look shows the cart; the first page shrank to its URL, its picture gone
    assert [len(pictures(m)) for m in second["messages"] if m["role"] == "user"] == [0, 1]
    assert pictures(second["messages"][-1])[0].tobytes() != home.tobytes()
    [judge_saw] = pictures(judged["messages"][-1])
    assert judge_saw.size == (800, 600)
    assert all(not pictures(m) for m in blind["messages"])


def test_goal_steps_where_the_test_has_no_goal_step_is_the_suites_asking(tmp_path: Path, web_shop_url: str,
                                                                         shared_chromium: str) -> None:
    # no goal step: goal_steps is never measured, whatever the page does (it was the agent's failure, exit 1)
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  shop: { type: browser, url: "{{env.WEB_SHOP_URL}}", allowed_domains: ["127.0.0.1"] }
tests:
  - name: search
    target: shop
    steps:
      - { action: fill, selector: "#q", value: dune }
    assert:
      - metric: { name: goal_steps, lte: 6 }
""")
    env = _env(web_shop_url, shared_chromium)
    checked = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert ("warning: s.tamesu.yaml:9:17: tests[0].assert[0].metric: goal_steps is measured only by `goal` steps, "
            "which this test has none of: every run of the test is an error") in checked.stderr, checked.stderr
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    result = _run_result(tmp_path / "out", "s", "search")
    assert (result["status"], result["fault"]) == ("error", "suite"), result
    assert result["error"] == "metric: goal_steps is measured only by `goal` steps, which this test has none of"
