"""Another agent of tamesu.yaml playing a helper role: the simulator, a validator, or a test case generator.

Each request is a fresh one-turn session on that target (the helper is stateless, as the design's helper agents
are): the turn's text is the request as JSON, and its `options.metadata` carries the same fields with
`test_mode` (`simulator`, `validator` or `generator`), so a rest helper reads them from its body (`options`),
an A2A helper from its message metadata. The answer is the helper's response document when it has the
expected fields, else the JSON object in its text; a simulator may also answer plain text (the next message).
A helper that cannot be reached or answers nothing usable is an infrastructure error (exit 3), never a verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tamesu import targets
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.conversation import Exchange, Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.jsonl.simulators import conversation, runtime
from tamesu.models.base import Models
from tamesu.models.structured import find_json
from tamesu.roles.simulator import UserAction, UserSimulator
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context
from tamesu.targets.base import TargetSpec


class TargetHelper:
    def __init__(self, name: str, spec: TargetSpec, secrets: Secrets, base_dir: Path) -> None:
        self.name = name
        self.spec = spec
        self.secrets = secrets
        self.base_dir = base_dir

    async def ask(self, mode: str, request: dict[str, Any], models: Models | None,
                  connector: str | None = None) -> tuple[Any, str]:
        """(response document, text) of the helper's answer to one request. `connector` (the design's
        `options.connector`) is the model a model target answers with, and travels as `options.connector` to
        any other target."""
        workdir = tempfile.mkdtemp(prefix=f"tamesu-{mode}-")
        run_id = f"{mode}-{uuid.uuid4().hex[:8]}"
        context = Context(secrets=self.secrets, env=dict(os.environ), vars={}, captured={},
                          run={"id": run_id, "number": 1})
        session = Session(context=context, artifacts_dir=Path(workdir), redactor=self.secrets.redactor,
                          run_id=run_id, base_dir=self.base_dir, models=models)
        spec = self.spec
        if connector is not None and spec.type == "model":
            spec = spec.model_copy(update={"model": connector})
        target = targets.target_class(spec.type)(spec, self.name)
        options: dict[str, Any] = {"metadata": {"test_mode": mode, **request}}
        if connector is not None:
            options["connector"] = connector
        turn = UserTurn(text=json.dumps(request, ensure_ascii=False, default=str), options=options)
        try:
            await target.open(session)
            agent = await target.send(turn)
        except TurnError as exc:
            raise InfraError(f"{mode} {self.name}: {exc}") from exc
        finally:
            try:
                await target.close()
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        return agent.response, agent.text

    async def answer(self, mode: str, request: dict[str, Any], models: Models | None,
                     schema: type[BaseModel], connector: str | None = None) -> BaseModel:
        response, text = await self.ask(mode, request, models, connector)
        tried = [response if isinstance(response, dict) else None, _json_in(text)]
        for candidate in (c for c in tried if c is not None):
            try:
                return schema.model_validate(candidate)
            except ValidationError:
                continue
        raise InfraError(f"{mode} {self.name}: no usable answer ({', '.join(schema.model_fields)}) in "
                         f"{(text or json.dumps(response, default=str))[:200]!r}")


class SimulatorReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input: str = ""
    goal_achieved: bool = False
    reasoning: str = ""


class TargetSimulator(UserSimulator):
    """The design's simulator interface: persona, goal, conversation, last_response, turn_number, max_turns in;
    input, goal_achieved, reasoning out (or the next message as plain text)."""

    def __init__(self, helper: TargetHelper, settings: dict[str, Any], max_turns: int, models: Models | None,
                 case_id: str) -> None:
        self.helper = helper
        self.settings = settings
        self.max_turns = max_turns
        self.models = models
        self.case_id = case_id
        self.last_reasoning: str | None = None

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        request = {**self.settings, "test_id": self.case_id, "conversation": conversation(exchanges),
                   "last_response": exchanges[-1].agent.text if exchanges else "",
                   "turn_number": len(exchanges) + 1, "max_turns": self.max_turns, **runtime(exchanges, context)}
        response, text = await self.helper.ask("simulator", request, self.models)
        reply = _simulator_reply(response, text)
        self.last_reasoning = reply.reasoning or None
        if reply.goal_achieved:
            return UserAction(stop="goal_achieved")
        if not reply.input.strip():
            return UserAction(stop="simulator_stopped")
        return UserAction(turn=UserTurn(text=reply.input.strip(), source="simulator"))


def _simulator_reply(response: Any, text: str) -> SimulatorReply:
    for candidate in (response, _json_in(text)):
        if isinstance(candidate, dict) and ("input" in candidate or "goal_achieved" in candidate):
            return SimulatorReply.model_validate(candidate)
    return SimulatorReply(input=text)  # a plain answer is the next message itself


def _json_in(text: str) -> Any:
    try:
        return find_json(text)
    except ValueError:
        return None


class ValidatorReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    passed: bool
    score: float | None = None
    reason: str = ""
    suggestions: list[str] = Field(default_factory=list)


class TargetValidator(Check):
    """`"type": "agent"` with `use` naming a target: the design's validator interface (the conversation in scope
    as messages, the metadata with the criteria, the case's `test_id`) answered with {passed, score, reason,
    suggestions}; `options.connector` is the model that target answers with."""

    key = "agent"
    Spec = BaseModel

    def __init__(self, helper: TargetHelper, metadata: dict[str, Any], test_id: str = "",
                 connector: str | None = None) -> None:
        super().__init__(None)
        self.helper = helper
        self.metadata = metadata
        self.test_id = test_id
        self.connector = connector

    async def evaluate(self, run: RunView) -> Verdict:
        request = {**self.metadata, "test_id": self.test_id, "messages": conversation(run.exchanges)}
        reply = await self.helper.answer("validator", request, run.models, ValidatorReply, self.connector)
        assert isinstance(reply, ValidatorReply)
        return Verdict(passed=reply.passed, reason=f"{reply.reason or 'no reason given'} ({self.helper.name})",
                       score=reply.score, evidence=reply.suggestions, model=f"target:{self.helper.name}")


class GeneratedCases(BaseModel):
    model_config = ConfigDict(extra="ignore")

    cases: list[dict[str, Any]] = Field(min_length=1)
