"""A conversation driven turn by turn from outside the run loop: the same session, target opening, metrics and
grading view a run of the engine has, with the caller choosing each turn. The Python API (`tamesu.testing`)
holds one open; a `TargetHelper` opens one per request to ask another agent of tamesu.yaml one question (the
JSONL design's simulator, validator and generator agents).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ValidationError

from tamesu import targets
from tamesu.checks.base import RunView
from tamesu.conversation import AgentTurn, Exchange, Session, TurnError, UserTurn
from tamesu.engine import metrics as metric_math
from tamesu.errors import InfraError
from tamesu.matching import quoted
from tamesu.models.base import Models
from tamesu.models.client import ModelRegistry
from tamesu.models.structured import json_in
from tamesu.plan.targets import with_connector
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context
from tamesu.targets.base import Target, TargetSpec
from tamesu.targets.bounds import checked_turn

OPEN_TIMEOUT = 60.0
CLOSE_TIMEOUT = 30.0


class LiveSession:
    def __init__(self, target: Target[TargetSpec], session: Session, models: Models | None, workdir: str,
                 owns_models: bool = True) -> None:
        self.target = target
        self.session = session
        self.models = models
        self._workdir = workdir
        self._owns_models = owns_models
        self.exchanges: list[Exchange] = []

    @classmethod
    async def open(cls, name: str, spec: TargetSpec, *, secrets: Secrets, base_dir: Path,
                   models: Models | None, variables: dict[str, object] | None = None,
                   open_timeout: float = OPEN_TIMEOUT, label: str = "live", owns_models: bool = True) -> LiveSession:
        """The target opened on a fresh session whose artifacts go to a temporary folder (removed on close).
        With `owns_models` the models are the session's from now on (`close` closes them); without, they stay
        the caller's (a run's registry, lent to a helper agent)."""
        workdir = tempfile.mkdtemp(prefix=f"tamesu-{label}-")
        run_id = f"{label}-{uuid.uuid4().hex[:8]}"
        context = Context(secrets=secrets, env=dict(os.environ), vars=variables or {}, captured={},
                          run={"id": run_id, "number": 1})
        session = Session(context=context, artifacts_dir=Path(workdir), redactor=secrets.redactor, run_id=run_id,
                          base_dir=base_dir, models=models)
        target = targets.target_class(spec.type)(spec, name)
        try:
            async with asyncio.timeout(open_timeout):
                await target.open(session)
        except BaseException:
            await _quietly(target.close())
            if models is not None and owns_models:
                await _close_models(models)
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return cls(target, session, models, workdir, owns_models)

    async def send(self, turn: UserTurn) -> tuple[int, AgentTurn]:
        """One user turn; returns its number (from 1) and the agent's turn."""
        index = len(self.exchanges) + 1
        agent = checked_turn(await self.target.send(turn), self.target.kind)
        for call in agent.tool_calls:
            call.turn = index
        self.exchanges.append(Exchange(index, turn, agent))
        return index, agent

    def view(self) -> RunView:
        """The conversation so far as an assertion reads a finished run."""
        exchanges = list(self.exchanges)
        measured = metric_math.from_exchanges(exchanges, {**self.session.counters, **self.target.metrics()})
        return RunView(exchanges=exchanges, metrics=measured, captured={}, events=self.session.events,
                       tool_calls=[c for e in exchanges for c in e.agent.tool_calls], context=self.session.context,
                       base_dir=self.session.base_dir, models=self.models, redactor=self.session.redactor)

    async def close(self) -> None:
        try:
            await _quietly(self.target.close())
            if self.models is not None and self._owns_models:
                await _close_models(self.models)
        finally:
            shutil.rmtree(self._workdir, ignore_errors=True)


async def _close_models(models: Models) -> None:
    if isinstance(models, ModelRegistry):
        await models.aclose()


class TargetHelper:
    """Another agent of tamesu.yaml asked one question at a time: each request a fresh one-turn session on that
    target (the design's helper agents are stateless). The turn's text is the request as JSON, and its
    `options.metadata` carries the same fields with `test_mode` (`simulator`, `validator` or `generator`), and
    `options.skip` is `{"history": true}`, the design's "don't save test messages to history": a rest helper
    reads them from its body (`options`, or `{{options.skip.history}}` in a template), an A2A helper from its
    message metadata (`skip` beside the fields). A helper that cannot be
    reached is an infrastructure error (exit 3), never a verdict."""

    def __init__(self, name: str, spec: TargetSpec, secrets: Secrets, base_dir: Path) -> None:
        self.name = name
        self.spec = spec
        self.secrets = secrets
        self.base_dir = base_dir

    async def ask(self, mode: str, request: Mapping[str, object], models: Models | None,
                  connector: str | None = None) -> tuple[object, str]:
        """(response document, text) of the helper's answer to one request. `connector` (the design's
        `options.connector`) is the model a model target answers with, and travels as `options.connector` to
        any other target."""
        # the design's `Skip{History: true}` ("Don't save test messages to history") on every helper call
        options: dict[str, object] = {"skip": {"history": True}, "metadata": {"test_mode": mode, **request}}
        if connector is not None:
            options["connector"] = connector
        turn = UserTurn(text=json.dumps(request, ensure_ascii=False, default=str), options=options)
        try:
            live = await LiveSession.open(self.name, with_connector(self.spec, connector), secrets=self.secrets,
                                          base_dir=self.base_dir, models=models, label=mode, owns_models=False)
            try:
                _, agent = await live.send(turn)
            finally:
                await live.close()
        except TurnError as exc:
            raise InfraError(f"{mode} {self.name}: {exc}") from exc
        return agent.response, agent.text

    async def answer(self, mode: str, request: Mapping[str, object], models: Models | None,
                     schema: type[BaseModel], connector: str | None = None) -> BaseModel:
        """The answer read as `schema`: the response document when it has the fields, else the JSON object in
        the text; neither is an infrastructure error."""
        response, text = await self.ask(mode, request, models, connector)
        tried = (response if isinstance(response, dict) else None, json_in(text))
        for candidate in (c for c in tried if c is not None):
            try:
                return schema.model_validate(candidate)
            except ValidationError:
                continue
        raise InfraError(f"{mode} {self.name}: no usable answer ({', '.join(schema.model_fields)}) in "
                         f"{quoted(text or json.dumps(response, default=str), 200)}")


async def _quietly(closing: object) -> None:
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await closing  # type: ignore[misc]  # any close() result, awaited when it is awaitable
    except Exception:  # closing is best effort: the caller's own outcome matters more
        return
