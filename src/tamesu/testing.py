"""Script tests in Python: talk to an agent and grade its answers with tamesu's own assertions, from pytest.

The spirit of the design's `t.assert.Agent()`: a test opens a session on a target of tamesu.yaml (or a URL),
sends messages (text, one message, or a message history), and checks each reply with the same assertions a
suite or a JSONL file uses, judges and validators included. Nothing here is a second engine: the session is
the engine's `Session`, the target is the target class `tamesu run` uses, the checks are the engine's checks.

    from tamesu.testing import AgentSession

    def test_asks_before_submitting():
        with AgentSession.open("expense", project="examples/expense-agent") as agent:
            reply = agent.send("I want to submit an expense")
            agent.expect(reply, contains="type of expense")                  # a suite's assertion
            reply = agent.send("Business travel, $3500")
            agent.expect(reply, {"type": "tool_called", "name": "create_expense"})   # a JSONL assertion
            agent.expect_agent(reply, "The agent asks to confirm before submitting")  # a validator (judge)

`AgentSession` runs its own event loop; inside `async` tests use `AsyncAgentSession` (the same methods,
awaited). `expect*` raise AssertionError with the check's reason; `check*` return the Verdict.

Every secret of the project (`{{secrets.X}}` in tamesu.yaml) is masked in what this API shows: the verdicts,
the AssertionError, a failed turn's error and a Reply's repr (which pytest prints beside a failure and writes to
`--junitxml`). A Reply's fields stay as the agent sent them, for the test's own assertions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from tamesu.checks import AssertionProblem
from tamesu.checks.base import Verdict
from tamesu.conversation import Exchange, ToolCall, TurnError
from tamesu.engine.live import LiveSession, TargetHelper
from tamesu.engine.models import project_models
from tamesu.errors import InfraError
from tamesu.jsonl.assertions import to_engine
from tamesu.jsonl.run import user_turn
from tamesu.jsonl.schema import ChatMessage, as_messages
from tamesu.plan import Project, find_project, load_project, load_project_targets
from tamesu.plan.targets import (
    Resolver,
    TargetProblem,
    dropped_options,
    for_the_agent,
    history_refusal,
    resolve,
    unknown_model,
    with_connector,
)
from tamesu.roles.awaiting import Awaiting, detect
from tamesu.suite.secrets import Secrets

__all__ = ["AgentSession", "AsyncAgentSession", "Reply"]

_MESSAGES = TypeAdapter(list[ChatMessage])


def _as_is(text: str) -> str:
    return text


@dataclass(repr=False)
class Reply:
    """One answer of the agent."""

    text: str
    turn: int
    """1 for the first answer of the session."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    response: Any = None
    """The response document (`json_path` reads it)."""
    awaiting: Awaiting | None = None
    """Whether the agent awaits input after this answer, and why (as multi-turn JSONL tests decide it)."""
    _mask: Callable[[str], str] = field(default=_as_is, compare=False)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in
                          ("text", "turn", "tool_calls", "response", "awaiting"))
        return self._mask(f"Reply({shown})")


class AsyncAgentSession:
    def __init__(self, live: LiveSession, resolver: Resolver, connector: str | None = None) -> None:
        self._live = live
        self._resolver = resolver
        self._connector = connector
        """Sent as every turn's `options.connector` (a target other than a model target), as `tamesu test -c`."""

    @property
    def exchanges(self) -> list[Exchange]:
        return self._live.exchanges

    @classmethod
    async def open(cls, target: str, *, project: str | Path | None = None, config: str | Path | None = None,
                   connector: str | None = None) -> AsyncAgentSession:
        """A session on `target` (a target of the project's tamesu.yaml, or a URL: http(s):// for a rest or A2A
        agent, grpc(s):// for tamesu's turn API). `project` is a folder where
        tamesu.yaml is found (default: the current one, or above); `config` names the file itself. `connector`, as
        `tamesu test -c`: the model a model target answers with, else every turn's `options.connector`."""
        start = Path(project) if project is not None else Path.cwd()
        if project is not None and not start.exists():  # else the search began at its parent: another project
            raise ValueError(f"project {project}: no such folder (project= is the folder of tamesu.yaml)")
        loaded = load_project(Path(config) if config else find_project(start), start)
        secrets = Secrets(loaded.dir / name for name in loaded.spec.secrets.env_files)
        if loaded.doc is not None:
            secrets.mask_named(loaded.doc.data)
        try:
            resolved, _ = await resolve(target, loaded, secrets, None if config else start)
        except TargetProblem as exc:
            # in the words of this API, not of `tamesu test -n` (ValueError: what a wrong argument raises)
            said = str(exc).removeprefix(f"-n {target}: ").replace("with -n ", "")
            where = f" (AgentSession.open takes a target of {loaded.dir / 'tamesu.yaml'}; a suite's targets are " \
                "not there)" if loaded.doc is not None else ""
            raise ValueError(f"{said}{where}") from None
        if connector is not None:  # a wrong argument, said before any agent is reached (as `-c` is one line)
            model = resolved.spec.type == "model"
            why = unknown_model(connector, loaded.spec.models) if model else \
                dropped_options(resolved.spec.type, ["connector"])
            if why is not None:
                raise ValueError(f"connector {connector}: {why}")
        live = await LiveSession.open(resolved.name, with_connector(resolved.spec, connector), secrets=secrets,
                                      base_dir=loaded.dir, models=project_models(loaded, secrets, None),
                                      variables=loaded.spec.vars)
        return cls(live, _resolver(loaded, secrets), None if resolved.spec.type == "model" else connector)

    async def send(self, message: str | dict[str, object] | list[dict[str, object]], *,
                   options: Mapping[str, object] | None = None) -> Reply:
        """Say `message` (text, one message, or a history ending with the user's message) and get the answer.
        A history travels with the turn, as a standard JSONL case sends it; a target that cannot carry one
        (voice, phone, browser) raises ValueError rather than send the last message alone."""
        try:
            messages = _MESSAGES.validate_python(as_messages(message))
        except ValidationError as exc:
            raise ValueError(f"not a message or a message history: {exc.errors()[0]['msg']}") from None
        if not messages or messages[-1].role != "user":
            raise ValueError("the last message must be the user's")
        if len(messages) > 1:
            target = self._live.target
            refusal = history_refusal(target.kind, target.name)
            if refusal is not None:  # sent, only its last message would reach the agent
                raise ValueError(f"a history of {len(messages)} messages cannot be sent: {refusal}")
        if self._connector is not None:  # the turn's own connector wins, as a JSONL turn's over `-c`
            options = {"connector": self._connector, **(options or {})}
        if options and (dropped := dropped_options(self._live.target.kind, for_the_agent(options))) is not None:
            raise ValueError(f"these options cannot be sent: {dropped}")  # as `tamesu test` warns of them
        turn = user_turn(messages, self._live.session.base_dir, options or {})
        redactor = self._live.session.redactor
        try:
            index, agent = await self._live.send(turn)
        except TurnError as exc:  # the agent's own words may repeat a secret (a header it echoes)
            masked = TurnError(redactor.text(str(exc)), redactor.data(exc.raw), exc.status)
            masked.tool_calls = exc.tool_calls
            raise masked from None
        except InfraError as exc:
            raise InfraError(redactor.text(str(exc))) from None
        return Reply(text=agent.text, turn=index, tool_calls=list(agent.tool_calls), response=agent.response,
                     awaiting=detect(agent), _mask=redactor.text)

    async def check(self, reply: Reply | None = None, assertion: Mapping[str, object] | None = None,
                    **shorthand: object) -> Verdict:
        """Grade one assertion on `reply` (None: the whole conversation so far). The assertion is written as a
        suite writes it (`{"contains": "x"}`, or `contains="x"`) or as a JSONL file does (`{"type": ...}`)."""
        if reply is not None and not isinstance(reply, Reply):  # `reply.text`, as `t.assert.Agent(resp.content)`
            raise TypeError(f"grade the Reply that send() returned (or None: the whole conversation), not "
                            f"{type(reply).__name__}: expect(reply, contains='...') reads the reply's text itself")
        if (assertion is None) == (not shorthand):
            raise ValueError("give one assertion: a mapping, or one keyword such as contains='...'")
        raw = assertion if assertion is not None else shorthand
        try:
            parsed = to_engine(raw, self._resolver, reply.turn if reply is not None else None)
        except AssertionProblem as exc:
            where = ".".join(str(p) for p in exc.loc)
            raise ValueError(f"{where + ': ' if where else ''}{exc.message}") from None
        verdict = await parsed.check.evaluate(self._live.view().scoped(parsed.on_turn))
        # a verdict quotes the agent (reason, evidence, a judge's answers): shown by the test, never a secret
        return Verdict.model_validate(self._live.session.redactor.data(verdict.model_dump()))

    async def expect(self, reply: Reply | None = None, assertion: Mapping[str, object] | None = None,
                     **shorthand: object) -> Verdict:
        verdict = await self.check(reply, assertion, **shorthand)
        if not verdict.passed:
            raise AssertionError(verdict.reason)
        return verdict

    async def check_agent(self, reply: Reply | None, criteria: str, *, use: str | None = None,
                          connector: str | None = None, **metadata: object) -> Verdict:
        """A validator's verdict (`"type": "agent"`): `criteria` and the other metadata judged by the model `use`
        (default `models.judge`), or by the target `use` names; `connector` is the model that answers (the
        design's `options.connector`), never a line of the rubric."""
        options: dict[str, object] = {"metadata": {"criteria": criteria, **metadata}}
        if connector is not None:
            options["connector"] = connector
        raw: dict[str, object] = {"type": "agent", "options": options}
        if use is not None:
            raw["use"] = use
        return await self.check(reply, raw)

    async def expect_agent(self, reply: Reply | None, criteria: str, *, use: str | None = None,
                           connector: str | None = None, **metadata: object) -> Verdict:
        verdict = await self.check_agent(reply, criteria, use=use, connector=connector, **metadata)
        if not verdict.passed:
            raise AssertionError(verdict.reason)
        return verdict

    async def close(self) -> None:
        await self._live.close()

    async def __aenter__(self) -> AsyncAgentSession:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


class AgentSession:
    """`AsyncAgentSession` for plain (not async) tests: every call runs on the session's own event loop."""

    def __init__(self, runner: asyncio.Runner, inner: AsyncAgentSession) -> None:
        self._runner = runner
        self._inner = inner

    @classmethod
    def open(cls, target: str, *, project: str | Path | None = None, config: str | Path | None = None,
             connector: str | None = None) -> AgentSession:
        runner = asyncio.Runner()
        try:
            inner = runner.run(AsyncAgentSession.open(target, project=project, config=config, connector=connector))
        except BaseException:
            runner.close()
            raise
        return cls(runner, inner)

    @property
    def exchanges(self) -> list[Exchange]:
        return self._inner.exchanges

    def send(self, message: str | dict[str, object] | list[dict[str, object]], *,
             options: Mapping[str, object] | None = None) -> Reply:
        return self._runner.run(self._inner.send(message, options=options))

    def check(self, reply: Reply | None = None, assertion: dict[str, Any] | None = None, **shorthand: Any) -> Verdict:
        return self._runner.run(self._inner.check(reply, assertion, **shorthand))

    def expect(self, reply: Reply | None = None, assertion: Mapping[str, object] | None = None,
               **shorthand: object) -> Verdict:
        return self._runner.run(self._inner.expect(reply, assertion, **shorthand))

    def check_agent(self, reply: Reply | None, criteria: str, *, use: str | None = None,
                    connector: str | None = None, **metadata: object) -> Verdict:
        return self._runner.run(self._inner.check_agent(reply, criteria, use=use, connector=connector, **metadata))

    def expect_agent(self, reply: Reply | None, criteria: str, *, use: str | None = None,
                     connector: str | None = None, **metadata: object) -> Verdict:
        return self._runner.run(self._inner.expect_agent(reply, criteria, use=use, connector=connector,
                                                         **metadata))

    def close(self) -> None:
        try:
            self._runner.run(self._inner.close())
        finally:
            self._runner.close()

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _resolver(project: Project, secrets: Secrets) -> Resolver:
    specs = load_project_targets(project)[0] if project.spec.targets else {}
    return Resolver(models=set(project.spec.models), targets=set(specs),
                    search=list(dict.fromkeys([project.dir, Path.cwd()])),
                    helpers={name: TargetHelper(name, spec, secrets, project.dir) for name, spec in specs.items()})

