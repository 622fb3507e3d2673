"""The pytest plugin: suites collected as pytest items, run by pytest itself in a child process."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import forked
from example_shop import example_shop
from report_fixtures import ReportAgent, report_suite
from tamesu.net.serve import ThreadServer

XSD = Path(__file__).parent / "fixtures" / "junit.xsd"


def _plugin_args() -> list[str]:
    """`-p tamesu.pytest_plugin` until the package's pytest11 entry point loads it by itself."""
    installed = any(ep.value == "tamesu.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "tamesu.pytest_plugin"]


def run_pytest(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m pytest ARGS` in a child process, forked from the worker's warm process (tests/forked.py): a
    fresh one spent 1.3 s of CPU starting, 0.6 s of it importing what the warm process has."""
    # a project of its own: no ini file above it, no cache, and pytest-asyncio kept out of the way. Nothing above
    # it either (`--confcutdir`, which an ini file in the folder would set): with `-c /dev/null` alone it is
    # /dev, and pytest collected each folder above the suite, listing every entry of /tmp as a directory node
    # (5,500 on a shared machine: 3 of a run's 5 s, in each xdist worker too)
    command = [*_plugin_args(), "-p", "no:cacheprovider", "-p", "no:asyncio", "--rootdir", str(cwd), "--confcutdir",
               str(cwd), "-c", os.devnull, *args]
    return forked.run(command, cwd, {**os.environ, "NO_COLOR": "1", **(env or {})}, 300, module="pytest")


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    with example_shop(tmp_path_factory.mktemp("shop")) as (folder, url):
        yield folder, {"SHOP_URL": url}


def test_the_example_suite_passes_over_two_xdist_workers(shop: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    folder, env = shop
    junit = tmp_path / "junit.xml"
    result = run_pytest(["-n", "2", "-v", str(folder / "shop.tamesu.yaml"), "--junitxml", str(junit),
                         "--tamesu-out", str(tmp_path / "runs")], cwd=folder, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "created: 2/2 workers" in result.stdout
    assert "8 passed" in result.stdout
    assert "[gw0]" in result.stdout and "[gw1]" in result.stdout  # both workers ran tests
    import xmlschema  # here, not at collection: 0.13 s of CPU in every xdist worker

    xmlschema.XMLSchema(XSD).validate(str(junit))
    names = sorted(case.get("name") for case in ET.parse(junit).getroot().iter("testcase"))
    assert names == ["a customer returns a jacket", "asks for a person", "order lookups [delivered]",
                     "order lookups [shipped]", "order lookups [unknown]", "order status", "return an order",
                     "streams its answer"]
    # every item left a tamesu run, all in the one folder of this session
    [session] = list((tmp_path / "runs").iterdir())
    assert session.name.startswith("pytest-") and len([d for d in session.iterdir() if d.is_dir()]) == 8

    picked = run_pytest([str(folder / "shop.tamesu.yaml"), "-k", "lookups and not unknown", "-q"],
                        cwd=folder, env=env)
    assert picked.returncode == 0, picked.stdout + picked.stderr
    assert "2 passed, 6 deselected" in picked.stdout
    tagged = run_pytest([str(folder / "shop.tamesu.yaml"), "-m", "smoke", "-q"], cwd=folder, env=env)
    assert "2 passed, 6 deselected" in tagged.stdout, tagged.stdout


def test_every_status_maps_to_pytest(tmp_path: Path) -> None:
    agent = ReportAgent()
    server = ThreadServer(agent.app()).start()
    try:
        report_suite(tmp_path, server.url)  # shop.yaml: not *.tamesu.yaml, so the ini option names it
        result = run_pytest(["-o", "tamesu_files=*.yaml", "-rA", "--tamesu-out", "runs"], cwd=tmp_path)
    finally:
        server.stop()
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "2 failed, 4 passed, 1 skipped, 1 xfailed" in out
    assert "FAILED shop.yaml::refund" in out and "FAILED shop.yaml::unreachable" in out
    assert 'contains: expected the agent to say "refund issued"' in out  # the reason, in the failure
    assert 'judge: rubric "The agent is polite": the agent refuses curtly (fake judge)' in out
    assert "evidence: I can't do that." in out
    assert "  user: refund please" in out  # and the transcript
    assert "XFAIL shop.yaml::flaky - quarantined (SUP-412 flaky)" in out
    assert "SKIPPED [1] shop.yaml" in out and "waiting for the billing API" in out


def test_a_broken_suite_is_a_collection_error_with_its_position(tmp_path: Path) -> None:
    (tmp_path / "bad.tamesu.yaml").write_text("targets: {}\ntests:\n  - name: x\n    target: nowhere\n")
    result = run_pytest(["-q"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert "bad.tamesu.yaml:4:13: tests[0].target: no target named 'nowhere'" in result.stdout


def test_a_secret_the_agent_echoes_is_masked_in_pytests_output_and_junit(tmp_path: Path) -> None:
    # before: the failure's text came from the results in memory, unmasked: the token in pytest's console and in
    # its --junitxml, while tamesu's own files masked it
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"reply": "ok", "auth": request.headers.get("authorization", "")})

    server = ThreadServer(Starlette(routes=[Route("/chat", echo, methods=["POST"])])).start()
    try:
        (tmp_path / ".env").write_text("API_TOKEN=sk-SUPERSECRET-12345\n")
        (tmp_path / "tamesu.yaml").write_text("suites: ['*.tamesu.yaml']\n")
        (tmp_path / "echo.tamesu.yaml").write_text(f"""\
targets:
  bot:
    type: rest
    url: "{server.url}/chat"
    headers: {{ Authorization: "Bearer {{{{secrets.API_TOKEN}}}}" }}
    response: {{ text: $.reply }}
tests:
  - name: echoes
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert: [ {{ json_path: {{ path: $.auth, equals: nothing }} }} ]
""")
        result = run_pytest(["--junitxml", "junit.xml", "--tamesu-out", "runs"], cwd=tmp_path)
    finally:
        server.stop()
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'found "Bearer ***"' in result.stdout, result.stdout
    junit = (tmp_path / "junit.xml").read_text()
    assert "SUPERSECRET" not in result.stdout + result.stderr and "SUPERSECRET" not in junit


def test_a_secret_the_agent_echoes_is_masked_in_what_the_python_api_shows(tmp_path: Path) -> None:
    # before: AgentSession.expect raised the check's reason as it was, and pytest printed the Reply's repr beside
    # it: the token in clear in pytest's console and in --junitxml
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        said = (await request.json())["message"]
        auth = request.headers.get("authorization", "")
        if said == "fail":  # an error of the agent's quoting the header
            return JSONResponse({"error": f"refused {auth}"}, status_code=500)
        return JSONResponse({"reply": f"you sent {auth}"})

    server = ThreadServer(Starlette(routes=[Route("/chat", echo, methods=["POST"])])).start()
    try:
        (tmp_path / ".env").write_text("API_TOKEN=sk-SUPERSECRET-12345\n")
        (tmp_path / "tamesu.yaml").write_text(f"""\
targets:
  bot:
    type: rest
    url: "{server.url}/chat"
    headers: {{ Authorization: "Bearer {{{{secrets.API_TOKEN}}}}" }}
    response: {{ text: $.reply }}
""")
        (tmp_path / "test_api.py").write_text("""\
import pytest
from tamesu.testing import AgentSession

TOKEN = open(".env").read().partition("=")[2].strip()

def test_expect():
    with AgentSession.open("bot") as agent:
        reply = agent.send("hi")
        assert reply.text == "you sent Bearer " + TOKEN  # the test itself reads what the agent sent
        verdict = agent.check(reply, contains="nothere")
        assert "Bearer ***" in verdict.reason and TOKEN not in verdict.reason + repr(reply)
        agent.expect(reply, contains="nothere")

def test_failed_turn():
    with AgentSession.open("bot") as agent:
        agent.send("fail")
""")
        result = run_pytest(["--junitxml", "junit.xml", "test_api.py"], cwd=tmp_path)
    finally:
        server.stop()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 failed" in result.stdout and 'not found in 1 turn(s) of agent text: "you sent Bearer ***"' in \
        result.stdout, result.stdout
    assert "refused Bearer ***" in result.stdout, result.stdout
    junit = (tmp_path / "junit.xml").read_text()
    assert "SUPERSECRET" not in result.stdout + result.stderr and "SUPERSECRET" not in junit, result.stdout


def test_a_suites_load_stages_are_not_run_by_each_item_and_a_warning_says_so(tmp_path: Path) -> None:
    # before: each item ran its one test through the whole ramp after its verdict, silently (120 s of stages per
    # item here; the docs' `ramp: [1, 4, 8, 16], hold: 60s` 4 minutes each), its figures nowhere in pytest's output
    (tmp_path / "s.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot }\n"
        "models:\n  bot: { provider: fake, rules: [ { when: hi, say: hello } ] }\n"
        "load: { ramp: [1, 2], hold: 60s }\n"
        "tests:\n  - { name: greets, scenario: { script: [ { say: hi } ] } }\n")
    result = run_pytest(["-q", "--tamesu-out", "runs"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout, result.stdout
    assert "tamesu: suite s: its load: stages are not run under pytest" in result.stdout, result.stdout
    [session] = list((tmp_path / "runs").iterdir())
    [run] = [d for d in session.iterdir() if d.is_dir()]
    assert not (run / "load").exists(), sorted(p.name for p in run.iterdir())


def test_a_tag_named_as_pytests_own_marker_is_no_marker(tmp_path: Path) -> None:
    # before: `tags: [skip]` skipped the test, `[xfail]` made a pass XPASS, and `[timeout]` (pytest-timeout's
    # marker, with no argument) stopped the whole session with an INTERNALERROR
    (tmp_path / "t.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot }\n"
        "models:\n  bot: { provider: fake, rules: [ { when: hi, say: hello } ] }\n"
        "tests:\n" + "".join(f"  - {{ name: {name}, tags: [{tags}], scenario: {{ script: [ {{ say: hi }} ] }},"
                              " assert: [ { contains: hello } ] }\n"
                              for name, tags in (("a", "skip"), ("b", "xfail"), ("c", "timeout, smoke"))))
    result = run_pytest(["-q", "-rA", "--tamesu-out", "runs"], cwd=tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "3 passed" in out and "INTERNALERROR" not in out, out
    assert "tamesu: t/a: tag 'skip' is pytest's own marker (or a plug-in's), so it is no marker of this test: " \
           "-k skip selects it" in out, out
    picked = run_pytest(["-q", "-k", "xfail", "--tamesu-out", "runs"], cwd=tmp_path)
    assert "1 passed, 2 deselected" in picked.stdout, picked.stdout
    tagged = run_pytest(["-q", "-m", "smoke", "--tamesu-out", "runs"], cwd=tmp_path)  # a tag of its own still is
    assert "1 passed, 2 deselected" in tagged.stdout, tagged.stdout


def test_a_run_folder_that_cannot_be_made_is_one_line_per_item(tmp_path: Path) -> None:
    # before: a full asyncio and pytest traceback per item (4,687 lines for five tests)
    (tmp_path / "afile").write_text("")
    (tmp_path / "s.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot }\n"
        "models:\n  bot: { provider: fake, rules: [ { when: hi, say: hello } ] }\n"
        "tests:\n  - { name: greets, scenario: { script: [ { say: hi } ] } }\n")
    result = run_pytest(["-q", "--tamesu-out", "afile/runs"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert "tamesu: cannot write the run folder in " in result.stdout, result.stdout
    assert "Traceback" not in result.stdout and "asyncio" not in result.stdout, result.stdout
    assert len(result.stdout.splitlines()) < 20, result.stdout


def test_a_turn_the_timeout_cut_short_says_it_got_no_answer(tmp_path: Path) -> None:
    # before: the transcript under the failure ended "  user: be slow", as if the agent were still to answer;
    # the console, transcript.json, the HTML page and JUnit say "(no answer: why)"
    import asyncio

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        if "slow" in message:
            await asyncio.sleep(4)
        return JSONResponse({"reply": f"You said {message}."})

    server = ThreadServer(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).start()
    try:
        (tmp_path / "slow.tamesu.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{server.url}/chat", response: {{ text: $.reply }} }}
tests:
  - name: cut
    timeout: 1s
    scenario: {{ script: [ {{ say: hi }}, {{ say: be slow }} ] }}
""")
        result = run_pytest(["-q", "--junitxml", "junit.xml", "--tamesu-out", "runs"], cwd=tmp_path)
    finally:
        server.stop()
    assert result.returncode == 1, result.stdout + result.stderr
    why = "the test took longer than its timeout (1s)"
    assert f"  user: hi\n  agent: You said hi.\n  user: be slow\n  agent: (no answer: {why})\n" in result.stdout, \
        result.stdout
    assert f"agent: (no answer: {why})" in (tmp_path / "junit.xml").read_text()  # and in pytest's --junitxml


def test_a_suites_warnings_are_at_the_line_they_are_about(tmp_path: Path) -> None:
    # before: each was at `g.tamesu.yaml:0` (pytest's place for a file), and the golden one told of a
    # `--update-golden` run, an option pytest does not have
    (tmp_path / "g.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot }\n"
        "models:\n  bot: { provider: fake, rules: [ { when: hi, say: hello } ] }\n"
        "load: { ramp: [1], hold: 60s }\n"
        "tests:\n"
        "  - { name: a, tags: [xfail], scenario: { script: [ { say: hi } ] } }\n"
        "  - name: b\n    scenario: { script: [ { say: hi } ] }\n    assert: [ { golden: b.txt } ]\n")
    result = run_pytest(["-q", "--tamesu-out", "runs", "-W", "always"], cwd=tmp_path)
    out = result.stdout + result.stderr
    said = [line.strip() for line in out.splitlines() if "PytestWarning: tamesu:" in line]
    where = {line.split(": PytestWarning: tamesu: ")[1].split(":")[0]: Path(line.split(": PytestWarning")[0]).name
             for line in said}  # the golden one's place is in its words too: g.tamesu.yaml:10:25
    assert where == {"g.tamesu.yaml": "g.tamesu.yaml:10", "suite g": "g.tamesu.yaml:5", "g/a": "g.tamesu.yaml:7"}, out
    assert "no golden file b.txt yet (relative to the suite's folder): `tamesu run --update-golden` writes it " \
           "(pytest has no such option)" in out, out
    assert "a run with --update-golden" not in out, out
    # and the item's error, in pytest's output and in its result.json (it was "run with --update-golden to write
    # it", the command line's words, which pytest cannot do)
    error = "no golden file b.txt: `tamesu run --update-golden` writes it (pytest has no such option)"
    assert f"golden: {error}" in out, out
    [result] = [p for p in (tmp_path / "runs").rglob("result.json") if "/b/" in p.as_posix()]
    assert error in result.read_text(), result.read_text()
    assert "run with --update-golden" not in out + result.read_text(), out
