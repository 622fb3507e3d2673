"""`counterpart:`: another target of the suite in the user's seat, so two local agents talk through tamesu."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def negotiator(role: str, heard: list[str], quiet_after: int | None = None) -> Starlette:
    """Answers each message with its role and how many it heard; says nothing after `quiet_after` of them."""

    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        heard.append(message)
        if quiet_after is not None and len(heard) > quiet_after:
            return JSONResponse({"text": ""})
        return JSONResponse({"text": f"{role} reply {len(heard)}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def write_suite(tmp_path: Path, buyer: str, supplier: str, test: str) -> None:
    (tmp_path / "talk.tamesu.yaml").write_text(
        "targets:\n"
        f"  buyer: {{ type: rest, url: {buyer}/chat }}\n"
        f"  supplier: {{ type: rest, url: {supplier}/chat }}\n"
        f"tests:\n{test}", encoding="utf-8")


def result(out: Path, test: str) -> dict[str, Any]:
    return json.loads(next(out.glob(f"*/*/{test}/run-1/result.json")).read_text())


def test_two_agents_talk_until_max_turns(tmp_path: Path, serve: Any, tamesu: Any) -> None:
    buyer_heard: list[str] = []
    supplier_heard: list[str] = []
    buyer, supplier = serve(negotiator("buyer", buyer_heard)), serve(negotiator("supplier", supplier_heard))
    write_suite(tmp_path, buyer.url, supplier.url, """\
  - name: negotiate
    target: buyer
    counterpart: { target: supplier, opening: "500 units at 12 euros" }
    scenario: { max_turns: 3 }
    assert:
      - turns: { lte: 3 }
      - contains: "buyer reply 3"
""")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = result(tmp_path / "out", "negotiate")
    assert run["end_reason"] == "max_turns"
    users = [t["user"]["text"] for t in run["turns"]]
    assert users == ["500 units at 12 euros", "supplier reply 1", "supplier reply 2"]
    assert [t["user"]["source"] for t in run["turns"]] == ["counterpart"] * 3
    assert buyer_heard == users
    assert supplier_heard == ["buyer reply 1", "buyer reply 2"]
    assert [e["data"]["target"] for e in run["events"] if e["name"] == "counterpart"] == ["supplier"]


def test_without_an_opening_the_counterpart_answers_the_goal_and_may_stop(
        tmp_path: Path, serve: Any, tamesu: Any) -> None:
    supplier_heard: list[str] = []
    buyer, supplier = serve(negotiator("buyer", [])), serve(negotiator("supplier", supplier_heard, quiet_after=2))
    write_suite(tmp_path, buyer.url, supplier.url, """\
  - name: open by goal
    target: buyer
    counterpart: { target: supplier }
    scenario: { goal: "Sell 500 units", max_turns: 8 }
""")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = result(tmp_path / "out", "open-by-goal")
    assert supplier_heard[0] == "Sell 500 units"
    assert [t["user"]["text"] for t in run["turns"]] == ["supplier reply 1", "supplier reply 2"]
    assert run["end_reason"] == "simulator_stopped"


def test_a_counterpart_is_checked_when_the_suite_loads(tmp_path: Path, tamesu: Any) -> None:
    write_suite(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9", """\
  - name: nobody
    target: buyer
    counterpart: { target: seller }
  - name: nothing to say
    target: buyer
    counterpart: { target: supplier }
  - name: a script beside it
    target: buyer
    counterpart: { target: supplier, opening: hi }
    scenario: { script: [ { say: never said } ] }
  - name: misspelt
    target: buyer
    counterpart: { target: suplier, opening: hi }
  - name: a stop_when beside it
    target: buyer
    counterpart: { target: supplier, opening: hi }
    scenario: { stop_when: the buyer agrees }
""")
    done = tamesu(["validate"], cwd=tmp_path)
    assert done.returncode != 0
    assert "no target named 'seller'" in done.stdout + done.stderr
    assert "no target named 'suplier' (did you mean 'supplier'? targets: " in done.stdout + done.stderr
    assert "the counterpart needs an opening, or scenario.goal" in done.stdout + done.stderr
    # it validated, then the script was never sent and the run went on to max_turns
    assert "counterpart plays the user, so scenario.script would never be used" in done.stdout + done.stderr
    # before: valid, and nothing judged it: the two agents talked on to max_turns past the condition
    assert "tests[4]: counterpart plays the user, so scenario.stop_when would never be used" in done.stderr, done.stderr


def delegator(role: str) -> Starlette:
    """Asks the remote agent named in the body (`billing`, over A2A JSON-RPC) before each answer, as an
    orchestrator does: `ROLE asks: MESSAGE`."""

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        async with httpx.AsyncClient(timeout=10) as http:
            await http.post(body["billing"], headers={"A2A-Version": "1.0"}, json={
                "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                    "messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                    "parts": [{"text": f"{role} asks: {body['message']}"}]}}})
        return JSONResponse({"text": f"{role} checked billing"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def test_only_the_agent_under_tests_calls_are_its_delegations(tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # both agents delegate to billing: the supplier's calls (the counterpart's) were counted as the buyer's,
    # so `delegations` said 3 and `delegated_to` passed on what the supplier sent
    buyer, supplier = serve(delegator("buyer")), serve(delegator("supplier"))
    body = '{ message: "{{message}}", billing: "{{remote.billing.url}}" }'
    (tmp_path / "talk.tamesu.yaml").write_text(
        "remote_agents:\n  billing: { reply: noted }\n"
        "targets:\n"
        f"  buyer: {{ type: rest, url: {buyer.url}/chat, request: {{ body: {body} }} }}\n"
        f"  supplier: {{ type: rest, url: {supplier.url}/chat, request: {{ body: {body} }} }}\n"
        """\
tests:
  - name: both delegate
    target: buyer
    counterpart: { target: supplier, opening: "500 units" }
    scenario: { max_turns: 2 }
    assert:
      - metric: { name: delegations, equals: 2 }
      - delegated_to: { agent: billing, contains: "buyer asks" }
  - name: the supplier is no delegation of the buyer
    target: buyer
    counterpart: { target: supplier, opening: "500 units" }
    scenario: { max_turns: 2 }
    assert:
      - delegated_to: { agent: billing, contains: "supplier asks" }
""", encoding="utf-8")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    run = result(tmp_path / "out", "both-delegate")
    assert run["status"] == "passed", run["assertions"]
    assert [c["args"]["message"] for c in run["tool_calls"]] == ["buyer asks: 500 units",
                                                                   "buyer asks: supplier checked billing"]
    theirs = [e["data"] for e in run["events"] if e["name"] == "counterpart_delegated"]
    assert [(e["counterpart"], e["agent"], e["message"]) for e in theirs] == [
        ("supplier", "billing", "supplier asks: buyer checked billing")]
    supplier_run = result(tmp_path / "out", "the-supplier-is-no-delegation-of-the-buyer")
    assert supplier_run["status"] == "failed"
    # what it looked for quoted as other reasons quote (it was a Python repr: 'supplier asks')
    assert supplier_run["assertions"][0]["reason"] == '2 delegation(s) to billing, none containing "supplier asks"'


def test_a_counterpart_whose_task_fails_makes_the_run_an_error_saying_why(
        tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # an A2A counterpart (a remote agent of the suite) answering with a failed task ended the run as
    # simulator_stopped, passed, with nothing saying it had failed nor why
    buyer, haggler = serve(negotiator("buyer", [])), serve(negotiator("haggler", []))
    (tmp_path / "talk.tamesu.yaml").write_text(f"""\
remote_agents:
  supplier:
    replies:
      - {{ when: "buyer reply", say: "inventory database unreachable", state: failed }}
      - {{ when: "haggler reply", say: "no deal", state: rejected }}
targets:
  buyer: {{ type: rest, url: {buyer.url}/chat }}
  haggler: {{ type: rest, url: {haggler.url}/chat }}
  seller: {{ type: a2a, url: "{{{{remote.supplier.url}}}}" }}
tests:
  - name: fails
    target: buyer
    counterpart: {{ target: seller, opening: "500 units" }}
    scenario: {{ max_turns: 4 }}
  - name: rejects
    target: haggler
    counterpart: {{ target: seller, opening: "500 units" }}
    scenario: {{ max_turns: 4 }}
""", encoding="utf-8")
    done = tamesu(["run", "--out", str(tmp_path / "out"), "--color", "never"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "counterpart seller: its task failed: inventory database unreachable" in done.stdout
    failed = result(tmp_path / "out", "fails")
    assert (failed["status"], failed["end_reason"]) == ("error", "error")
    assert [e["data"] for e in failed["events"] if e["name"] == "counterpart_failed"] == [
        {"counterpart": "seller", "state": "failed", "message": "inventory database unreachable"}]
    rejected = result(tmp_path / "out", "rejects")
    assert (rejected["status"], rejected["end_reason"]) == ("passed", "simulator_stopped"), rejected
    assert [e["data"] for e in rejected["events"] if e["name"] == "user_side"][-1] == {
        "counterpart": "seller", "stopped": True, "reason": "ended the conversation", "state": "rejected",
        "message": "no deal"}


def background_delegator(role: str, delays: list[float], follow_up_after: float) -> Starlette:
    """Asks billing before each answer, as `delegator`; its answer to the Nth message waits `delays[N-1]` seconds
    (it composes). After its first answer it follows up on that billing conversation in the background, its
    `contextId` named, `follow_up_after` seconds after the first message came."""
    heard: list[str] = []
    tasks: set[asyncio.Task[None]] = set()

    async def ask(billing: str, text: str, context: str | None = None) -> str:
        message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
        if context:
            message["contextId"] = context
        async with httpx.AsyncClient(timeout=10) as http:
            answer = (await http.post(billing, headers={"A2A-Version": "1.0"}, json={
                "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}})).json()
        found = answer.get("result", {})
        return str(found.get("task", found.get("message", {})).get("contextId", ""))

    async def follow_up(billing: str, context: str, at: float) -> None:
        await asyncio.sleep(max(0.0, at - asyncio.get_running_loop().time()))
        await ask(billing, f"{role} follows up", context)

    async def chat(request: Request) -> JSONResponse:
        came = asyncio.get_running_loop().time()
        body = await request.json()
        heard.append(body["message"])
        context = await ask(body["billing"], f"{role} asks: {body['message']}")
        if len(heard) == 1:
            task = asyncio.create_task(follow_up(body["billing"], context, came + follow_up_after))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.sleep(delays[min(len(heard), len(delays)) - 1])
        return JSONResponse({"text": f"{role} checked billing"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def test_a_follow_up_sent_in_the_background_is_its_senders_whoever_has_the_floor(
        tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # a message reached billing while the other side had the floor, so it was taken for the other side's: the
    # buyer's follow-up, sent while the supplier composed, was the supplier's (counterpart_delegated), and the
    # supplier's, sent while the buyer composed, was a delegation of the buyer. A follow-up names the billing
    # conversation its sender began: it is that sender's
    buyer = serve(background_delegator("buyer", [0.0, 2.0], follow_up_after=0.7))
    supplier = serve(background_delegator("supplier", [2.0], follow_up_after=2.7))
    body = '{ message: "{{message}}", billing: "{{remote.billing.url}}" }'
    (tmp_path / "talk.tamesu.yaml").write_text(
        "remote_agents:\n  billing: { reply: noted }\n"
        "targets:\n"
        f"  buyer: {{ type: rest, url: {buyer.url}/chat, request: {{ body: {body} }} }}\n"
        f"  supplier: {{ type: rest, url: {supplier.url}/chat, request: {{ body: {body} }} }}\n"
        """\
tests:
  - name: in the background
    target: buyer
    counterpart: { target: supplier, opening: "500 units" }
    scenario: { max_turns: 2 }
""", encoding="utf-8")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = result(tmp_path / "out", "in-the-background")
    assert [c["args"]["message"] for c in run["tool_calls"]] == [
        "buyer asks: 500 units", "buyer follows up", "buyer asks: supplier checked billing"], run["tool_calls"]
    theirs = [e["data"]["message"] for e in run["events"] if e["name"] == "counterpart_delegated"]
    assert theirs == ["supplier asks: buyer checked billing", "supplier follows up"], theirs
    assert run["metrics"]["delegations"] == 3


def test_a_call_refused_while_the_counterpart_has_the_floor_is_the_counterparts(
        tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # billing refuses a caller without its token: the supplier's refused calls counted in the buyer's
    # delegations_refused, so `metric: {name: delegations_refused, equals: 0}` failed the buyer for them
    def caller(role: str, token: str | None) -> Starlette:
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            headers = {"A2A-Version": "1.0", **({"Authorization": f"Bearer {token}"} if token else {})}
            async with httpx.AsyncClient(timeout=10) as http:
                await http.post(body["billing"], headers=headers, json={
                    "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": f"{role} asks"}]}}})
            return JSONResponse({"text": f"{role} checked billing"})

        return Starlette(routes=[Route("/chat", chat, methods=["POST"])])

    buyer, supplier = serve(caller("buyer", "s3cret-token")), serve(caller("supplier", None))
    body = '{ message: "{{message}}", billing: "{{remote.billing.url}}" }'
    (tmp_path / "talk.tamesu.yaml").write_text(
        "remote_agents:\n  billing: { reply: noted, token: s3cret-token }\n"
        "targets:\n"
        f"  buyer: {{ type: rest, url: {buyer.url}/chat, request: {{ body: {body} }} }}\n"
        f"  supplier: {{ type: rest, url: {supplier.url}/chat, request: {{ body: {body} }} }}\n"
        """\
tests:
  - name: refused
    target: buyer
    counterpart: { target: supplier, opening: "500 units" }
    scenario: { max_turns: 3 }
    assert:
      - metric: { name: delegations_refused, equals: 0 }
      - metric: { name: delegations, equals: 3 }
""", encoding="utf-8")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = result(tmp_path / "out", "refused")
    assert [e["data"] for e in run["events"] if e["name"] == "delegation_refused"] == [], run["events"]
    theirs = [e["data"] for e in run["events"] if e["name"] == "counterpart_delegation_refused"]
    assert theirs == [{"counterpart": "supplier", "agent": "billing", "binding": "http",
                       "reason": "no valid bearer token"}] * 2, theirs
    assert run["metrics"]["counterpart_delegations_refused"] == 2


def test_a_fuzzed_call_the_counterpart_made_is_not_the_agent_under_tests(
        tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # both sides call billing, which `fuzz_tools` makes fail: the supplier's fuzzed calls counted in the buyer's
    # tools_fuzzed (and its `tool_fuzzed` events named no counterpart), so a check of how many faults the buyer
    # met read the supplier's too
    def caller(role: str) -> Starlette:
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            async with httpx.AsyncClient(timeout=10) as http:
                await http.post(body["billing"], headers={"A2A-Version": "1.0"}, json={
                    "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": f"{role} asks"}]}}})
            return JSONResponse({"text": f"{role} checked billing"})

        return Starlette(routes=[Route("/chat", chat, methods=["POST"])])

    buyer, supplier = serve(caller("buyer")), serve(caller("supplier"))
    body = '{ message: "{{message}}", billing: "{{remote.billing.url}}" }'
    (tmp_path / "talk.tamesu.yaml").write_text(
        "remote_agents:\n  billing: { reply: noted }\n"
        "targets:\n"
        f"  buyer: {{ type: rest, url: {buyer.url}/chat, request: {{ body: {body} }} }}\n"
        f"  supplier: {{ type: rest, url: {supplier.url}/chat, request: {{ body: {body} }} }}\n"
        """\
tests:
  - name: fuzzed
    target: buyer
    fuzz_tools: { billing: error }
    counterpart: { target: supplier, opening: "500 units" }
    scenario: { max_turns: 3 }
    assert:
      - metric: { name: tools_fuzzed, equals: 3 }
""", encoding="utf-8")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = result(tmp_path / "out", "fuzzed")
    ours = [e["data"] for e in run["events"] if e["name"] == "tool_fuzzed"]
    assert ours == [{"tool": "billing", "mode": "error"}] * 3, run["events"]
    theirs = [e["data"] for e in run["events"] if e["name"] == "counterpart_tool_fuzzed"]
    assert theirs == [{"counterpart": "supplier", "tool": "billing", "mode": "error"}] * 2, theirs
    assert run["metrics"]["counterpart_tools_fuzzed"] == 2


def test_a_counterpart_that_cannot_talk_is_refused_where_it_is_named(tmp_path: Path, tamesu: Any) -> None:
    # before: validate said ok, and every run opened a browser for 4 s to fail, exit 3: "counterpart web: browser
    # target web has no chat block: a conversational test needs one"
    (tmp_path / "suite.yaml").write_text("""\
targets:
  buyer: { type: rest, url: "http://127.0.0.1:9/chat" }
  web: { type: browser, url: "http://127.0.0.1:9/" }
tests:
  - name: a page without its chat widget
    target: buyer
    counterpart: { target: web, opening: hi }
""")
    done = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "suite.yaml:7:28: tests[0].counterpart.target: browser target web cannot play the user: a browser test "
        "needs steps (goal, expect, action), or a chat block on its target to talk to the page's chat widget",
        "1 problem found"], done.stderr


def test_a_timeout_that_runs_out_while_the_counterpart_answers_is_no_failure_of_the_agent(
        tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # before: the buyer answered at once, the supplier (the counterpart) took 5 s, and the run read as the agent
    # under test's failure, "the test took longer than its timeout (1s)", fault: agent
    async def slow(request: Request) -> JSONResponse:
        await asyncio.sleep(5)
        return JSONResponse({"text": "too late"})

    buyer = serve(negotiator("buyer", []))
    supplier = serve(Starlette(routes=[Route("/chat", slow, methods=["POST"])]))
    write_suite(tmp_path, buyer.url, supplier.url, """\
  - name: slow supplier
    target: buyer
    timeout: 1s
    counterpart: { target: supplier, opening: "500 units at 12 euros" }
    scenario: { max_turns: 3 }
""")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    run = result(tmp_path / "out", "slow-supplier")
    assert run["status"] == "error" and run["fault"] == "environment", run
    assert run["error"] == ("the test's timeout (1s) ran out during the counterpart supplier's turn, not while the "
                            "agent answered"), run["error"]
    assert [t["agent"]["text"] for t in run["turns"]] == ["buyer reply 1"]  # the agent's one answer, in time


def test_a_counterpart_that_hands_off_says_so_and_to_whom(tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # before: an answer with a handoff that also ends the conversation (as the example shop's does) read
    # "ended the conversation", without `to`, while the same answer from the agent under test ends it as `handoff`
    async def desk(request: Request) -> JSONResponse:
        return JSONResponse({"text": "Passing you to a colleague.", "done": True, "handoff": {"queue": "support"}})

    buyer = serve(negotiator("buyer", []))
    supplier = serve(Starlette(routes=[Route("/chat", desk, methods=["POST"])]))
    (tmp_path / "talk.tamesu.yaml").write_text(
        "targets:\n"
        f"  buyer: {{ type: rest, url: {buyer.url}/chat }}\n"
        f"  supplier: {{ type: rest, url: {supplier.url}/chat, response: {{ done: $.done }},\n"
        "              handoff: { json_path: $.handoff, to: $.handoff.queue } }\n"
        "tests:\n"
        "  - name: hand off\n"
        "    target: buyer\n"
        "    counterpart: { target: supplier, opening: hello }\n"
        "    scenario: { max_turns: 4 }\n", encoding="utf-8")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = result(tmp_path / "out", "hand-off")
    assert run["end_reason"] == "simulator_stopped"
    [last] = [e["data"] for e in run["events"] if e["name"] == "user_side" and e["data"].get("stopped")]
    assert last == {"counterpart": "supplier", "stopped": True, "reason": "handed off", "to": "support"}, last
