"""What a turn costs tamesu beyond the wire (issue 28's ninth pass, docs/performance.md): each cut keeps what the
turn reads, sends and records, and is seen taken."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from agents.fixtures import RunningAgents, rest_agents
from sessions import new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.targets.rest.target import RestSpec, RestTarget

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


@asynccontextmanager
async def opened(spec: dict[str, Any], tmp_path: Path) -> AsyncIterator[RestTarget]:
    target = RestTarget(RestSpec.model_validate({"type": "rest", **spec}), "api")
    await target.open(new_session(tmp_path))
    try:
        yield target
    finally:
        await target.close()


async def test_a_rest_turn_sets_one_timer_its_own_timeout(rest_agents: RunningAgents, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # aiohttp's per-read timer (sock_read) was moved at every piece of the answer: two timer handles a turn more,
    # bounding reads the turn's own timeout already bounds
    loop = asyncio.get_running_loop()
    async with opened({"url": f"{rest_agents.url}/chat", "turn_timeout": "5s"}, tmp_path) as target:
        assert (await target.send(UserTurn(text="hi"))).text == "Echo 1: hi"  # connected, kept for the next turn
        timers: list[float] = []
        call_at = loop.call_at

        def counted(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            timers.append(when - loop.time())
            return call_at(when, *args, **kwargs)

        with monkeypatch.context() as patched:
            patched.setattr(loop, "call_at", counted)
            turn = await target.send(UserTurn(text="again"))
    assert turn.text == "Echo 2: again" and turn.status == 200
    assert len(timers) == 1 and 4 < timers[0] <= 5  # the turn's turn_timeout, and nothing else


async def test_an_answer_of_a_said_length_is_read_whole(rest_agents: RunningAgents, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.targets.rest import http

    pieces = http.bounded_chunks
    read_in_pieces: list[object] = []
    monkeypatch.setattr(http, "bounded_chunks", lambda *args: read_in_pieces.append(args) or pieces(*args))
    async with opened({"url": f"{rest_agents.url}/chat"}, tmp_path) as target:
        turn = await target.send(UserTurn(text="héllo 日本"))
        assert turn.text == "Echo 1: héllo 日本" and turn.response == {
            "text": "Echo 1: héllo 日本", "session_id": target.session_id, "turn": 1, "data": None, "auth": None}
        assert read_in_pieces == []  # its Content-Length said where it ends
        with pytest.raises(TurnError, match="internal failure"):  # a 500's body too
            await target.send(UserTurn(text="crash"))
    assert read_in_pieces == []


async def _serve(answer: bytes) -> tuple[asyncio.Server, str]:
    """A server on 127.0.0.1 that reads a request and writes `answer`, then closes the connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/chat"


@pytest.mark.parametrize("framing", [b"Content-Length: 40", b"Transfer-Encoding: chunked"])
async def test_an_answer_that_ends_before_its_framing_says_fails_the_turn(tmp_path: Path, framing: bytes) -> None:
    body = b'{"text": "cut' if framing.startswith(b"Content") else b'20\r\n{"text": "cut'
    server, url = await _serve(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + framing + b"\r\n\r\n"
                               + body)
    async with server, opened({"url": url, "connect": {"attempts": 1}}, tmp_path) as target:
        with pytest.raises(TurnError, match=r"^the answer broke off: ") as failed:
            await target.send(UserTurn(text="hi"))
    assert failed.value.status == 200


@pytest.mark.parametrize(("charset", "body", "text"), [
    ("", "héllo 日本".encode(), "héllo 日本"),
    ("; charset=latin-1", "déjà".encode("latin-1"), "déjà"),
    ("; charset=utf-16", "dé".encode("utf-16"), "dé"),
    ("", b"bad \xff byte", "bad \ufffd byte"),
])
async def test_a_whole_answer_is_decoded_as_its_charset_says(tmp_path: Path, charset: str, body: bytes,
                                                             text: str) -> None:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain{charset}\r\nContent-Length: {len(body)}\r\n\r\n"
    server, url = await _serve(head.encode() + body)
    async with server, opened({"url": url}, tmp_path) as target:
        assert (await target.send(UserTurn(text="hi"))).text == text


async def test_an_answer_is_read_once_for_its_text_and_its_tool_calls_only_where_found(
        rest_agents: RunningAgents, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.targets.rest import answer, read

    asked: list[str] = []
    itemised: list[object] = []
    held: list[object] = []
    values, items, holds = read.values, read._tool_items, answer.holds
    for module in (answer, read):
        monkeypatch.setattr(module, "values", lambda path, doc: asked.append(path) or values(path, doc))
    monkeypatch.setattr(read, "_tool_items", lambda found: itemised.append(found) or items(found))
    monkeypatch.setattr(answer, "holds", lambda condition, doc: held.append(condition) or holds(condition, doc))
    async with opened({"url": f"{rest_agents.url}/chat"}, tmp_path) as target:
        plain = await target.send(UserTurn(text="hi"))
        assert (plain.text, plain.tool_calls, plain.ended) == ("Echo 1: hi", [], False)
        assert asked.count("$.text") == 1 and itemised == [] and held == []  # no done condition: none looked for
        booked = await target.send(UserTurn(text="book saturday"))
    assert booked.text == "Booked Saturday 10:00." and [c.name for c in booked.tool_calls] == ["find_slot", "book_room"]
    assert booked.tool_calls[0].args == {"day": "saturday"} and booked.tool_calls[0].result == {"slot": "10:00"}
    async with opened({"url": f"{rest_agents.url}/chat", "response": {"done": "$.done"}}, tmp_path) as target:
        assert not (await target.send(UserTurn(text="hi"))).ended
        assert (await target.send(UserTurn(text="bye"))).ended and held


async def test_a_model_calls_answer_is_priced_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel

    from tamesu.models.base import Message, ModelRequest, ModelResponse, Usage
    from tamesu.models.client import ResilientClient
    from tamesu.models.spec import ModelSpec

    got: list[ModelRequest] = []

    class Provider:
        async def generate(self, request: ModelRequest) -> ModelResponse:
            got.append(request)
            return ModelResponse(text="hi", usage=Usage(input_tokens=1_000_000, output_tokens=1_000_000),
                                 provider="openai", model="gpt-4o-mini")

    client = ResilientClient(ModelSpec(provider="openai", model="gpt-4o-mini"), cast(Any, Provider),
                             mask=lambda value: value.replace("s3cret", "***") if isinstance(value, str) else value)
    copied: list[object] = []
    model_copy = BaseModel.model_copy
    monkeypatch.setattr(BaseModel, "model_copy", lambda self, **kw: copied.append(self) or model_copy(self, **kw))
    request = ModelRequest(purpose="simulator", messages=[Message(role="user", content="hello")],
                           context={"note": "plain"})
    answer = await client.generate(request)
    assert not any(isinstance(each, ModelResponse) for each in copied)  # priced in place, not copied whole
    assert answer.cost_usd == pytest.approx(0.75) and answer.text == "hi"  # 0.15 + 0.60 a million tokens each
    secret = ModelRequest(purpose="simulator", messages=[Message(role="user", content="my s3cret")],
                          context={"note": "plain"})
    await client.generate(secret)
    assert got[1].messages[0].content == "my ***" and secret.messages[0].content == "my s3cret"


def test_a_runs_records_are_written_where_they_were_without_pathlib_joins(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import pathlib

    from tamesu.engine._run_records import written
    from tamesu.engine.artifacts import RunDirectory
    from tamesu.engine.conversation import RunOutcome
    from tamesu.results.records import RunResult, Transcript
    from tamesu.results.rundir import slug
    from tamesu.suite.secrets import Redactor

    directory = RunDirectory(tmp_path, Redactor())
    run_dir = directory.test_dir("Suite é", "c1") / "run-1"
    result = RunResult(suite="Suite é", test="c1", run=1, status="passed", started_at="now", target="bot",
                       target_type="rest")
    outcome = RunOutcome(result, Transcript(test="c1", run=1))
    joined: list[object] = []
    join = pathlib.PurePath.__truediv__
    monkeypatch.setattr(pathlib.PurePath, "__truediv__", lambda self, key: joined.append(key) or join(self, key))
    written(directory, run_dir, outcome)
    assert joined == []  # two or three joins a run, some fifteen calls each
    assert json.loads((tmp_path / "Suite-é" / "c1" / "run-1" / "result.json").read_text())["test"] == "c1"
    assert json.loads((run_dir / "transcript.json").read_text())["lines"] == []
    for _ in range(3):
        assert slug("Suite é") == "Suite-é"
    assert slug.cache_info().hits >= 2  # a suite's name, made a folder's for every test of it


async def test_a_model_calls_place_without_a_limit_is_taken_in_a_few_calls() -> None:
    import sys

    from tamesu.models._gate import Gate
    from tamesu.models.base import Message, ModelRequest
    from tamesu.models.spec import ModelSpec

    request = ModelRequest(purpose="simulator", messages=[Message(role="user", content="hi")])
    spec = ModelSpec(provider="fake", model="m")
    held = Gate(None).held(request, spec)
    calls = 0

    def counted(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(counted)
    try:
        async with held:
            pass
    finally:
        sys.setprofile(None)
    assert calls <= 6, calls  # a generator's context manager, and another inside it for the deadline's naming: 21


def test_a_turn_without_files_gathers_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.conversation import FileRef
    from tamesu.targets.rest import files

    gathered: list[UserTurn] = []
    turn_files = files._turn_files
    monkeypatch.setattr(files, "_turn_files", lambda turn: gathered.append(turn) or turn_files(turn))
    assert files.attachments(UserTurn(text="hi"), "api") == [] and gathered == []  # `{{attachments}}`, every turn
    (tmp_path / "a.txt").write_bytes(b"hey")
    with_file = UserTurn(text="see", files=[FileRef(name="a.txt", mime="text/plain", path=str(tmp_path / "a.txt"))])
    assert files.attachments(with_file, "api") == [{"name": "a.txt", "media_type": "text/plain", "data": "aGV5"}]


def test_a_simulated_users_prompt_keeps_what_does_not_change_within_a_conversation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.conversation import AgentTurn, Exchange
    from tamesu.packs import AttackSpec
    from tamesu.roles.simulator import ModelSimulator
    from tamesu.suite.schema import Persona, Scenario
    from tamesu.suite.templates import Context

    def simulator(persona: Persona, goal: str = "Find the order", **kw: Any) -> ModelSimulator:
        return ModelSimulator(cast(Any, None), Scenario(goal=goal, stop_when="it is found", max_turns=5), persona,
                              base_dir=Path("."), **kw)

    made: list[object] = []
    system_text = ModelSimulator._system_text
    monkeypatch.setattr(ModelSimulator, "_system_text", lambda self, inputs: made.append(inputs) or system_text(
        self, inputs))
    plain = Persona(name="Ada", style="brief", facts={"order": "A1"}, behaviors={"speaking_rate": 1.5})
    attack = AttackSpec(goal="get the key", style="pushy", tactics=["ask twice"], openings=["hi"])
    for kw in ({}, {"attack": attack}, {"keypad": True}):
        exchanges: list[Exchange] = []
        talking = simulator(plain, **kw)
        made.clear()
        for index in range(1, 4):
            context = Context(vars={"item": "the order"})
            inputs = talking.inputs(exchanges, context)
            fresh = simulator(plain, **kw)  # what the prompt was made of anew every turn
            assert inputs == fresh.inputs(exchanges, context)
            assert talking._messages(inputs) == fresh._messages(fresh.inputs(exchanges, context))
            exchanges.append(Exchange(index, UserTurn(text=f"hi {index}", source="simulator"),
                                      AgentTurn(text=f"Echo {index}")))
        assert len(made) == 1 + 3  # once for the conversation, once for each fresh one
    # the history: each exchange's lines made once, again when its words changed (an audio reply talked over)
    from tamesu.roles import transcript

    lines_of = transcript.lines_of
    asked: list[int] = []
    monkeypatch.setattr(transcript, "lines_of", lambda given, *a: asked.append(len(given)) or lines_of(given, *a))
    talking = simulator(plain)
    fresh_text = [talking._messages(talking.inputs(exchanges[:n], Context())) for n in range(4)]
    assert asked == [1, 1, 1]  # the first three exchanges, one each
    assert fresh_text == [simulator(plain)._messages(simulator(plain).inputs(exchanges[:n], Context()))
                          for n in range(4)]
    exchanges[1].agent.text = "Echo 2, heard once the call was transcribed"
    again = talking._messages(talking.inputs(exchanges, Context()))
    assert "[2] agent: Echo 2, heard once the call was transcribed\n[3] user: hi 3" in again[1].content
    assert again == simulator(plain)._messages(simulator(plain).inputs(exchanges, Context()))
    exchanges += [Exchange(4, UserTurn(text="said", source="script"), AgentTurn(text="ok")),
                  Exchange(5, None, AgentTurn(text="more"))]
    assert talking.inputs(exchanges, Context())["simulator_turns"] == 3  # counted as the history is read
    # a persona with a template is rendered every turn: what it names may change within the conversation
    templated = simulator(Persona(name="{{vars.who}}"))
    first = templated._messages(templated.inputs([], Context(vars={"who": "Ada", "item": "x"})))
    second = templated._messages(templated.inputs([], Context(vars={"who": "Bo", "item": "x"})))
    assert "Name: Ada" in first[0].content and "Name: Bo" in second[0].content
    nested = simulator(Persona(name="Ada", facts={"order": "{{vars.item}}"}))
    assert nested.inputs([], Context(vars={"item": "A1"}))["persona"]["facts"] == {"order": "A1"}
    assert nested.inputs([], Context(vars={"item": "B2"}))["persona"]["facts"] == {"order": "B2"}
    goal = simulator(Persona(name="Ada"), "Find {{vars.item}}")
    assert goal.inputs([], Context(vars={"item": "a"}))["goal"] == "Find a"
    assert goal.inputs([], Context(vars={"item": "b"}))["goal"] == "Find b"


async def test_a_model_request_is_copied_only_for_what_changes_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel

    from tamesu.models.base import Message, ModelRequest, ModelResponse
    from tamesu.models.client import ResilientClient
    from tamesu.models.spec import ModelSpec
    from tamesu.models.structured import ask_structured, json_schema_of
    from tamesu.roles.simulator import SimulatorAnswer

    got: list[ModelRequest] = []

    class Provider:
        async def generate(self, request: ModelRequest) -> ModelResponse:
            got.append(request)
            return ModelResponse(text='{"input": "hi"}', provider="openai", model="gpt-4o-mini")

    def client(**kw: Any) -> ResilientClient:
        return ResilientClient(ModelSpec(provider="openai", model="gpt-4o-mini", **kw), cast(Any, Provider),
                               mask=lambda v: v.replace("s3cret", "***") if isinstance(v, str) else (
                                   {k: v[k].replace("s3cret", "***") for k in v} if isinstance(v, dict) else v))
    copied: list[object] = []
    model_copy = BaseModel.model_copy
    monkeypatch.setattr(BaseModel, "model_copy", lambda self, **kw: copied.append(self) or model_copy(self, **kw))
    schema = json_schema_of(SimulatorAnswer)
    plain = ModelRequest(purpose="simulator", messages=[Message(role="user", content="hello")],
                         context={"note": "plain"}, json_schema=schema)
    found = await ask_structured(client(), plain, SimulatorAnswer)
    assert found.value.input == "hi" and got == [plain] and copied == []  # nothing masked, defaulted or added
    # what is masked, defaulted or asked for is copied in, the caller's request left as it was
    asked = ModelRequest(purpose="simulator", messages=[Message(role="user", content="my s3cret")],
                         context={"note": "s3cret"})
    await ask_structured(client(temperature=0.5), asked, SimulatorAnswer)
    sent = got[-1]
    assert (sent.messages[0].content, sent.context, sent.temperature, sent.json_schema) == (
        "my ***", {"note": "***"}, 0.5, schema)
    assert (asked.messages[0].content, asked.context, asked.temperature, asked.json_schema) == (
        "my s3cret", {"note": "s3cret"}, None, None)
    only_context = ModelRequest(purpose="simulator", messages=[Message(role="user", content="hi")],
                                context={"note": "s3cret"}, json_schema=schema)
    await ask_structured(client(), only_context, SimulatorAnswer)
    assert got[-1].context == {"note": "***"} and got[-1].messages == only_context.messages


async def test_an_answer_without_the_default_tool_call_keys_is_not_searched_for_tool_calls(
        rest_agents: RunningAgents, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from tamesu.targets.rest import answer

    searched: list[str] = []
    tool_calls = answer.tool_calls
    monkeypatch.setattr(answer, "tool_calls", lambda path, docs: searched.append(path) or tool_calls(path, docs))
    async with opened({"url": f"{rest_agents.url}/chat"}, tmp_path) as target:
        plain = await target.send(UserTurn(text="hi"))
        assert (plain.text, plain.tool_calls, searched) == ("Echo 1: hi", [], [])  # four paths asked, none found
        booked = await target.send(UserTurn(text="book saturday"))
    assert [c.name for c in booked.tool_calls] == ["find_slot", "book_room"] and searched == ["$.tool_calls"]
    openai = {"choices": [{"message": {"content": "Done.", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 7}'}}]}}]}
    body = json.dumps(openai).encode()
    server, url = await _serve(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                               + str(len(body)).encode() + b"\r\n\r\n" + body)
    async with server, opened({"url": url, "response": {"text": "$.choices[0].message.content"}}, tmp_path) as target:
        turn = await target.send(UserTurn(text="hi"))
    assert (turn.text, [(c.name, c.args) for c in turn.tool_calls]) == ("Done.", [("lookup", {"id": 7})])


def test_a_prompt_section_without_values_is_made_once_and_every_section_fills_as_written() -> None:
    import re
    from importlib import resources
    from string import Template

    from tamesu.roles import prompt_files

    sections = 0
    for package in ("tamesu.roles", "tamesu.evaluators"):
        for entry in resources.files(package).joinpath("prompts").iterdir():
            found = re.match(r"^([a-z_]+)\.v(\d+)\.md$", entry.name)
            if not found:
                continue
            prompt = prompt_files.load(found.group(1), int(found.group(2)), package)
            for name, text in prompt.sections.items():
                wanted = {m.group("named") or m.group("braced") for m in Template.pattern.finditer(text)} - {None}
                values: dict[str, object] = {key: f'{{"{key}": "$x ${{y}} }}{{"}}\n  ' for key in wanted}
                if values:
                    values[sorted(wanted)[0]] = 7  # a turn's number
                assert prompt.render(name, **values, unused="{}") == Template(text).substitute(values).strip()
                sections += 1
    assert sections > 20  # every section of every prompt
    simulator = prompt_files.load("simulator", 2)
    for odd in (True, 1.5, None):  # formatted otherwise than str() by str.format, or not at all: as before
        assert simulator.render("user", history=odd, turn=1, max_turns=2, turn_count=1, tool_results="") == \
            Template(simulator.sections["user"]).substitute(history=odd, turn=1, max_turns=2, turn_count=1,
                                                            tool_results="").strip()
    with pytest.raises(KeyError):
        simulator.render("user", turn=1)
    with pytest.raises(KeyError):
        simulator.render("user")
    alone = Template(simulator.sections["no_tool_results"]).substitute().strip()
    assert [simulator.render("no_tool_results") for _ in range(3)] == [alone] * 3
    assert prompt_files._alone.cache_info().hits >= 2  # a section without values, every simulated turn: made once


def test_a_budget_not_passed_is_checked_without_taking_its_lock() -> None:
    import threading

    from tamesu.models.base import ModelResponse, Usage
    from tamesu.models.ledger import BudgetExceeded, Ledger
    from tamesu.models.spec import BudgetSpec

    taken: list[str] = []

    class Counted:
        def __init__(self, name: str) -> None:
            self.name, self.lock = name, threading.Lock()

        def __enter__(self) -> None:
            taken.append(self.name)
            self.lock.acquire()

        def __exit__(self, *_: object) -> None:
            self.lock.release()

    run = Ledger(BudgetSpec(tokens=100))
    test = run.scope()
    run._lock, test._lock = cast(Any, Counted("run")), cast(Any, Counted("test"))
    test.ensure_open()
    assert taken == []  # twice a model call, on each ledger up to the run's
    used = ModelResponse(text="hi", usage=Usage(input_tokens=60, output_tokens=50), provider="fake", model="m")
    with pytest.raises(BudgetExceeded, match="110"):
        test.charge(used, "simulator")
    taken.clear()
    with pytest.raises(BudgetExceeded, match="110"):
        test.ensure_open()  # passed: said before another call is paid for
    assert taken == ["run"]  # the test's own ledger has no budget, so was never passed


def test_an_openai_answer_without_reasoning_fields_is_not_searched_for_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.models import _plain
    from tamesu.models.openai import OpenAIProvider

    provider = OpenAIProvider("m", api_key="k", base_url="http://127.0.0.1:9/v1")
    read: list[object] = []
    text = _plain.text
    monkeypatch.setattr(_plain, "text", lambda value: read.append(value) or text(value))

    def answer(**message: object) -> dict[str, object]:
        return {"model": "m", "choices": [{"message": {"role": "assistant", **message}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2}}

    plain = provider._response(answer(content="Hello"))
    assert (plain.text, plain.reasoning, plain.finish_reason) == ("Hello", "", "stop")
    assert len(read) == 3  # the content, the finish reason, the model: no reasoning field looked up
    for field in ("reasoning_content", "reasoning"):
        thought = provider._response(answer(content="Hello", **{field: "the user greets me"}))
        assert (thought.text, thought.reasoning) == ("Hello", "the user greets me")
    assert provider._response(answer(content="<think>hm</think>Hi")).reasoning == "hm"


@pytest.mark.parametrize("adapted", [[], ["the server refused seed: sent without it from now on"]])
async def test_a_model_calls_answer_is_copied_for_the_cache_only_to_leave_out_its_adaptations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, adapted: list[str]) -> None:
    import json

    from pydantic import BaseModel

    from tamesu.models.base import Message, ModelRequest, ModelResponse
    from tamesu.models.cache import ReplayCache
    from tamesu.models.client import ResilientClient
    from tamesu.models.spec import ModelSpec

    class Provider:
        async def generate(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text="hi", provider="openai", model="m", adapted=adapted)

    copied: list[object] = []
    model_copy = BaseModel.model_copy
    monkeypatch.setattr(BaseModel, "model_copy", lambda self, **kw: copied.append(self) or model_copy(self, **kw))
    for mode in ("off", "use"):
        cache = ReplayCache(tmp_path / mode, cast(Any, mode))
        client = ResilientClient(ModelSpec(provider="openai", model="m"), cast(Any, Provider), cache=cache)
        answer = await client.generate(ModelRequest(purpose="simulator", messages=[Message(role="user", content="a")]))
        assert answer.adapted == adapted
    assert len([each for each in copied if isinstance(each, ModelResponse)]) == (2 if adapted else 0)
    [entry] = (tmp_path / "use").glob("*/*.json")
    assert json.loads(entry.read_text())["response"] == {
        "text": "hi", "tool_calls": [], "finish_reason": None, "usage": {"input_tokens": 0, "output_tokens": 0},
        "provider": "openai", "model": "m", "cost_usd": 0.0, "cached": False, "fake": False}
    assert not list((tmp_path / "off").glob("**/*.json"))
