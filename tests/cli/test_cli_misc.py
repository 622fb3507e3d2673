"""The commands around `run`: init, validate, list, doctor, version, colour."""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


def test_init_writes_a_project_that_validates(tmp_path: Path, tamesu) -> None:
    made = tamesu(["init"], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "tamesu.yaml").is_file() and (tmp_path / "suites" / "first.yaml").is_file()
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "ok: 1 test in 1 suite"
    listed = tamesu(["list", "--json"], cwd=tmp_path)
    assert json.loads(listed.stdout) == {"id": "first/greets and answers", "suite": "first",
                                         "name": "greets and answers", "target": "my-agent",
                                         "tags": ["smoke"], "quarantined": False}
    again = tamesu(["init"], cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert made.stdout.splitlines()[-1].startswith("next: `tamesu run`")
    # a filter that matches nothing is said, as `run` says it (list printed nothing and nothing else)
    none = tamesu(["list", "--tags", "nosuch"], cwd=tmp_path)
    assert none.returncode == 0 and none.stdout == "" and "no test matches --tags nosuch" in none.stderr
    # into another folder: the next step says to go there first
    elsewhere = tamesu(["init", "my project"], cwd=tmp_path)
    assert elsewhere.stdout.splitlines()[-1].startswith("next: `cd 'my project'`, then `tamesu run`"), elsewhere.stdout


def test_a_filter_or_tag_that_chooses_nothing_says_what_would_have(tmp_path: Path, tamesu) -> None:
    # was only "no test matches --tags smok": the tag it is near, a filter that matches but for case, the tests
    (tmp_path / "suite.yaml").write_text(
        "targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
        "tests:\n  - { name: order status, target: bot, tags: [smoke], scenario: { script: [ { say: hi } ] } }\n")
    said = {
        ("--tags", "smok"): "no test matches --tags smok: no test is tagged 'smok' (did you mean 'smoke'?)",
        ("--tags", "nightly"): "no test matches --tags nightly: no test is tagged 'nightly' (tags: smoke)",
        ("--filter", "Order"): "no test matches --filter Order (it matches ignoring case: --filter '(?i)Order')",
        ("--filter", "refund"): "no test matches --filter refund (tests: suite/order status)",
    }
    for command, code in (("run", 2), ("list", 0)):
        for (flag, value), line in said.items():
            done = tamesu([command, "suite.yaml", flag, value], cwd=tmp_path)
            assert done.returncode == code and done.stderr.strip().splitlines()[-1] == line, done.stderr


def test_the_scaffolded_suite_runs_against_an_agent(tmp_path: Path, tamesu, serve) -> None:
    async def chat(request):
        body = await request.json()
        return JSONResponse({"reply": f"Hi! You said {body['message']}"})

    server = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])]))
    tamesu(["init"], cwd=tmp_path)
    suite = tmp_path / "suites" / "first.yaml"
    # the user's own agent: the url pointed at it, the sample agent's hooks deleted
    text = re.sub(r"http://127\.0\.0\.1:\d+", server.url, suite.read_text())
    suite.write_text(text[:text.index("hooks:")] + text[text.index("targets:"):])
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  first/greets and answers" in result.stdout


def test_doctor_reports_the_project_and_unreachable_targets(tmp_path: Path, tamesu) -> None:
    tamesu(["init"], cwd=tmp_path)
    suite = tmp_path / "suites" / "first.yaml"
    suite.write_text(re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:9", suite.read_text()))
    result = tamesu(["doctor"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "ok    1 test in 1 suite validate" in result.stdout
    assert "warn  target my-agent (rest) at http://127.0.0.1:9/chat: 127.0.0.1:9 does not answer" in result.stdout
    (tmp_path / "suites" / "broken.yaml").write_text("tests: [ { name: x } ]\n")
    broken = tamesu(["doctor"], cwd=tmp_path)
    assert broken.returncode == 3
    assert "FAIL  suites/broken.yaml:1:10: tests[0].target: missing required key" in broken.stdout


def test_doctor_says_a_hook_may_start_the_agent_it_found_down(tmp_path: Path, tamesu) -> None:
    # right after `tamesu init`, doctor warned that the sample agent "does not answer" and no more: the suite's
    # before_all hook starts it when `tamesu run` runs, which doctor does not
    tamesu(["init"], cwd=tmp_path)
    hooked = tamesu(["doctor"], cwd=tmp_path)
    assert hooked.returncode == 0, hooked.stdout
    [line] = [line for line in hooked.stdout.splitlines() if line.startswith("warn  target my-agent")]
    assert line.endswith("does not answer (ConnectionRefusedError); a before_all hook may start it, as `tamesu run` "
                         "does (doctor runs no hook)"), line
    suite = tmp_path / "suites" / "first.yaml"
    text = suite.read_text()
    suite.write_text(text[:text.index("hooks:")] + text[text.index("targets:"):])  # the user's own agent
    plain = tamesu(["doctor"], cwd=tmp_path)
    [line] = [line for line in plain.stdout.splitlines() if line.startswith("warn  target my-agent")]
    assert line.endswith("does not answer (ConnectionRefusedError)"), line


def test_doctor_checks_the_command_an_mcp_target_starts(tmp_path: Path, tamesu) -> None:
    # before: an mcp target over stdio has no url, so doctor said nothing of it; a command that is not there was
    # first met by `run`, each of its tests an error (exit 3)
    (tmp_path / "tamesu.yaml").write_text("models:\n  target: { provider: fake, rules: [ { say: hi } ] }\n")
    (tmp_path / "server.sh").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "server.sh").chmod(0o755)
    (tmp_path / "notes.txt").write_text("not a program\n")
    (tmp_path / "s.tamesu.yaml").write_text(
        "targets:\n"
        "  typo: { type: mcp, command: pyhton-nowhere, args: [server.py] }\n"
        "  local: { type: mcp, command: ./server.sh }\n"
        "  text: { type: mcp, command: ./notes.txt }\n"
        "tests:\n  - { name: a, target: local, scenario: { script: [ { say: hi } ] } }\n")
    result = tamesu(["doctor"], cwd=tmp_path)
    lines = [line for line in result.stdout.splitlines() if "(mcp)" in line]
    assert lines == [
        "FAIL  target typo (mcp): command 'pyhton-nowhere' is not on PATH",
        f"ok    target local (mcp): command ./server.sh found ({tmp_path / 'server.sh'})",
        "FAIL  target text (mcp): command './notes.txt' is not an executable file"], result.stdout
    assert result.returncode != 0


def test_doctor_checks_template_urls_and_a_project_of_jsonl_cases(tmp_path: Path, tamesu, serve) -> None:
    # before: a target whose url is `{{env.X}}/chat` (most of the docs') was left out without a word, and a
    # project whose suites are JSONL cases stopped doctor at "JSONL test cases, not a suite" (exit 3)
    async def chat(request):
        return JSONResponse({"reply": "hi"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "tamesu.yaml").write_text(
        "suites: [cases]\ntargets:\n  shop: { type: rest, url: '{{env.SHOP_URL}}/chat' }\n"
        "  later: { type: rest, url: '{{session.url}}/chat' }\n")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "c.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    result = tamesu(["doctor"], cwd=tmp_path, env={"SHOP_URL": url})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok    target shop (rest) at {url}/chat: reachable" in result.stdout, result.stdout
    assert "target later (rest): its url is made during the run, not checked here" in result.stdout, result.stdout
    assert "ok    1 test case in 1 JSONL file validate" in result.stdout, result.stdout
    # before: "0 tests in 0 suites validate", exit 0, over a case `tamesu validate` refuses (exit 2)
    (tmp_path / "cases" / "d.jsonl").write_text('{"id": "b", "input": "  "}\n')
    result = tamesu(["doctor"], cwd=tmp_path, env={"SHOP_URL": url})
    assert result.returncode == 3, result.stdout + result.stderr
    assert "FAIL  cases/d.jsonl:1:" in result.stdout and "write what the user says" in result.stdout, \
        result.stdout
    assert "0 tests in 0 suites" not in result.stdout, result.stdout


def test_doctor_says_a_url_of_an_unset_variable_is_not_the_runs_to_make(tmp_path: Path, tamesu) -> None:
    # before: beside the FAIL of the unset variable, the target's line said its url "is made during the run",
    # which a reader took for fine (a url of a session capture or a remote agent is made then; this one never is)
    (tmp_path / "suite.yaml").write_text("""\
targets:
  shop: { type: a2a, url: '{{env.SHOP_A2A_URL}}' }
  tools: { type: mcp, command: '{{env.MCP_SERVER}}', model: 'fake:x' }
tests: [ { name: t, target: shop, scenario: { script: [ { say: hi } ] } } ]
""")
    result = tamesu(["doctor", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "FAIL  suite.yaml:2:27: targets.shop.url: environment variable SHOP_A2A_URL is not set" in result.stdout
    assert "warn  target shop (a2a): not checked: its url's {{env.SHOP_A2A_URL}} has no value\n" in result.stdout, \
        result.stdout
    assert "warn  target tools (mcp): not checked: its command's {{env.MCP_SERVER}} has no value\n" in result.stdout
    assert "made during the run" not in result.stdout, result.stdout


def _grpc_server(health: bytes | None) -> Any:
    """A gRPC server on 127.0.0.1: with `health`, grpc.health.v1's Check answering those bytes; else serving
    nothing."""
    server = grpc.server(ThreadPoolExecutor(2))
    if health is not None:
        answer = grpc.unary_unary_rpc_method_handler(lambda request, context: health)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("grpc.health.v1.Health",
                                                                              {"Check": answer}),))
    server.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server


def test_doctor_checks_a_grpc_agent_as_grpc_and_says_what_it_checked(tmp_path: Path, tamesu, serve) -> None:
    # before: a TCP connect, so a web server on the port was "reachable" and a turn could only fail
    web = serve(Starlette(routes=[])).url.removeprefix("http://")
    servers = [_grpc_server(b"\x08\x01"), _grpc_server(b"\x08\x02"), _grpc_server(None)]
    serving, not_serving, plain = (f"grpc://127.0.0.1:{server.port}" for server in servers)
    try:
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  serving: {{ type: grpc, url: '{serving}' }}
  not_serving: {{ type: grpc, url: '{not_serving}' }}
  plain: {{ type: a2a, url: '{plain}' }}
  web: {{ type: grpc, url: 'grpc://{web}' }}
tests: [ {{ name: t, target: serving, scenario: {{ script: [ {{ say: hi }} ] }} }} ]
""")
        result = tamesu(["doctor", "suite.yaml"], cwd=tmp_path)
    finally:
        for server in servers:
            server.stop(None)
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout
    assert (f"ok    target serving (grpc) at {serving}: gRPC channel ready (TCP, HTTP/2); health (grpc.health.v1): "
            "SERVING") in said, said
    assert f"warn  target not_serving (grpc) at {not_serving}: gRPC channel ready (TCP, HTTP/2); health " \
           "(grpc.health.v1): NOT_SERVING" in said, said
    # a gRPC server without the A2A service: no card to read, said (tests/cli/test_doctor_a2a.py reads real ones)
    assert (f"warn  target plain (a2a) at {plain}: no agent card ({plain} GetExtendedAgentCard (A2A 1.0): gRPC "
            "UNIMPLEMENTED: Method not found!; ") in said, said
    assert (f"a run speaks GRPC 1.0 at {plain}: gRPC channel ready (TCP, HTTP/2); it offers no health service "
            "(grpc.health.v1)") in said, said
    assert f"warn  target web (grpc) at grpc://{web}: no gRPC channel (TCP, HTTP/2): the connection failed" in said


def test_version_and_colour(tmp_path: Path, tamesu) -> None:
    version = tamesu(["--version"], cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("tamesu, version ")
    tamesu(["init"], cwd=tmp_path)
    (tmp_path / "suites" / "first.yaml").write_text(
        "targets: { a: { type: rest, url: 'http://127.0.0.1:9/x', connect: { attempts: 1 } } }\n"
        "tests: [ { name: t, target: a, scenario: { script: [ { say: hi } ] } } ]\n")
    coloured = tamesu(["run", "--color", "always", "--out", "o1"], cwd=tmp_path)
    assert "\x1b[" in coloured.stdout
    plain = tamesu(["run", "--out", "o2"], cwd=tmp_path)  # NO_COLOR=1 is set by the fixture
    assert "\x1b[" not in plain.stdout and "ERR   first/t" in plain.stdout
    never = tamesu(["run", "--color", "never", "--out", "o3"], cwd=tmp_path, env={"NO_COLOR": ""})
    assert "\x1b[" not in never.stdout


def test_a_path_that_starts_with_a_tilde_is_in_the_home_folder(tmp_path: Path, tamesu) -> None:
    # `out: ~/runs` made a folder named `~` in the project (and `rm -rf ~/runs` of it is the user's home)
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / "secrets.env").write_text("CODE=ORD-77\n")
    (project / "tamesu.yaml").write_text(
        "out: ~/runs\ncache: { dir: ~/cache }\nsecrets: { env_files: [~/secrets.env] }\n"
        'models:\n  target: { provider: fake, rules: [{ say: "shipped" }] }\n'
        "targets:\n  bot: { type: model, model: target }\n")
    (project / "s.tamesu.yaml").write_text(
        "tests:\n  - name: order\n    target: bot\n    scenario: { script: [{ say: 'where is {{secrets.CODE}}?' }] }\n")
    done = tamesu(["run"], cwd=project, env={"HOME": str(home)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (project / "~").exists()
    [run] = (home / "runs").iterdir()
    transcript = json.loads((run / "s" / "order" / "run-1" / "transcript.json").read_text())
    assert "where is ***?" in json.dumps(transcript)  # the secret came from ~/secrets.env, masked as secrets are
    again = tamesu(["run", "--out=~/other"], cwd=project, env={"HOME": str(home)})  # no shell expands it there
    assert again.returncode == 0 and len(list((home / "other").iterdir())) == 1
    assert not (project / "~").exists()


def test_init_keeps_secrets_and_runs_out_of_the_repository(tmp_path: Path, tamesu, serve) -> None:
    # the project reads its secrets from .env and leaves a folder per test per run: without a .gitignore,
    # `git add .` committed the API keys, every run folder and the local store
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, timeout=30)
    (tmp_path / ".gitignore").write_text("node_modules/")  # the user's own, without a final newline
    made = tamesu(["init"], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert ("added .env, tamesu-runs/, .tamesu/store.db*, suites/.agent.pid to .gitignore"
            in made.stdout)  # the sample agent's log and pid, which its hooks write, too
    assert (tmp_path / ".gitignore").read_text().startswith("node_modules/\n# tamesu: ")

    async def chat(request: Any) -> JSONResponse:
        return JSONResponse({"reply": "Hi!"})

    suite = tmp_path / "suites" / "first.yaml"
    text = re.sub(r"http://127\.0\.0\.1:\d+", serve(Starlette(routes=[
        Route("/chat", chat, methods=["POST"])])).url, suite.read_text())
    suite.write_text(text[:text.index("hooks:")] + text[text.index("targets:"):])
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-test-not-committed\n")
    assert tamesu(["run"], cwd=tmp_path).returncode in (0, 1)
    assert (tmp_path / "tamesu-runs").is_dir() and list((tmp_path / ".tamesu").glob("store.db*"))
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                            capture_output=True, text=True, check=True, timeout=30).stdout
    tracked = sorted(line[3:] for line in status.splitlines())
    assert not [p for p in tracked if p == ".env" or p.startswith("tamesu-runs/") or "store.db" in p], tracked
    assert "tamesu.yaml" in tracked and ".tamesu/schema/suite.schema.json" in tracked


def test_doctor_checks_the_models_of_a_project_with_no_suite_yet(tmp_path: Path, tamesu) -> None:
    # the models page's tamesu.yaml, written before any suite: doctor said only that no suite matched, and
    # checked none of the models the page says it checks
    from ports import refused_port

    port = refused_port()
    (tmp_path / "tamesu.yaml").write_text(
        f'models:\n  local: {{ provider: openai, model: m, base_url: "http://127.0.0.1:{port}/v1" }}\n')
    result = tamesu(["doctor"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout
    assert "FAIL  tamesu.yaml:1:1: no suite files match suites/*.yaml, **/*.tamesu.yaml" in result.stdout
    assert f"FAIL  models.local (openai:m): openai:m: 127.0.0.1:{port} not reachable" in result.stdout, result.stdout
    assert "0 tests in 0 suites validate" not in result.stdout, result.stdout  # beside the FAIL, it read as fine
