"""A conversation driven turn by turn from outside the run loop (the Python API, `tamesu.testing`): the same
session, target opening, metrics and grading view a run of the engine has, with the caller choosing each turn.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from tamesu import targets
from tamesu.checks.base import RunView
from tamesu.conversation import AgentTurn, Exchange, Session, UserTurn
from tamesu.engine import metrics as metric_math
from tamesu.models.client import ModelRegistry
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context
from tamesu.targets.base import Target, TargetSpec

OPEN_TIMEOUT = 60.0
CLOSE_TIMEOUT = 30.0


class LiveSession:
    def __init__(self, target: Target, session: Session, models: ModelRegistry | None, workdir: str) -> None:
        self.target = target
        self.session = session
        self.models = models
        self._workdir = workdir
        self.exchanges: list[Exchange] = []

    @classmethod
    async def open(cls, name: str, spec: TargetSpec, *, secrets: Secrets, base_dir: Path,
                   models: ModelRegistry | None, variables: dict[str, object] | None = None,
                   open_timeout: float = OPEN_TIMEOUT) -> LiveSession:
        """The target opened on a fresh session whose artifacts go to a temporary folder (removed on close).
        The models are the session's from now on: `close` closes them."""
        workdir = tempfile.mkdtemp(prefix="tamesu-live-")
        run_id = f"live-{uuid.uuid4().hex[:8]}"
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
            if models is not None:
                await models.aclose()
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return cls(target, session, models, workdir)

    async def send(self, turn: UserTurn) -> tuple[int, AgentTurn]:
        """One user turn; returns its number (from 1) and the agent's turn."""
        index = len(self.exchanges) + 1
        agent = await self.target.send(turn)
        for call in agent.tool_calls:
            call.turn = index
        self.exchanges.append(Exchange(index, turn, agent))
        return index, agent

    def view(self) -> RunView:
        """The conversation so far as an assertion reads a finished run."""
        exchanges = list(self.exchanges)
        measured = metric_math.from_turns((e.agent for e in exchanges),
                                          {**self.session.counters, **self.target.metrics()})
        return RunView(exchanges=exchanges, metrics=measured, captured={}, events=self.session.events,
                       tool_calls=[c for e in exchanges for c in e.agent.tool_calls], context=self.session.context,
                       base_dir=self.session.base_dir, models=self.models, redactor=self.session.redactor)

    async def close(self) -> None:
        try:
            await _quietly(self.target.close())
            if self.models is not None:
                await self.models.aclose()
        finally:
            shutil.rmtree(self._workdir, ignore_errors=True)


async def _quietly(closing: object) -> None:
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await closing  # type: ignore[misc]
    except Exception:  # closing is best effort: the caller's own outcome matters more
        return
