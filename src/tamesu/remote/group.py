"""One run's remote agents.

`RemoteAgents` starts a suite's agents before the target opens (their URLs become `{{remote.NAME.url}}`)
and stops them after the run, whatever happened. Each message an agent receives is a `Delegation`
(`tamesu.remote.executor`): a `delegated` event, the `delegations` metric, and after the run a tool call of
kind `delegation` named after the agent, on the turn during which it was sent (`attach`).
A request refused for a missing or wrong `token` is a `delegation_refused` event, not a delegation. With a
`counterpart:`, a message sent while the counterpart had the floor (`others`) is the counterpart's: a
`counterpart_delegated` event, never a delegation of the agent under test; a message that goes on with a
conversation or task one side began (its `contextId` or task id) is that side's, whoever had the floor then (a
follow-up sent in the background).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from tamesu.conversation import Exchange, Session, ToolCall
from tamesu.errors import InfraError, TemplateError
from tamesu.runtime.cleanup import finish
from tamesu.suite.remote_agents import RemoteAgentSpec

if TYPE_CHECKING:
    from tamesu.remote.executor import Delegation
    from tamesu.remote.forward import Forwarding
    from tamesu.remote.server import RemoteAgentServer

__all__ = ["RemoteAgents", "as_tool_call"]

_STOP_LIMIT = 10.0
"""Seconds one agent may take to stop (its gRPC server has a grace of 1 s)."""


class RemoteAgents:
    """One run's remote agents. `urls` is the `remote` template namespace, filled by `start`."""

    def __init__(self, specs: Mapping[str, RemoteAgentSpec], session: Session, urls: dict[str, Any]) -> None:
        self._specs = dict(specs)
        self._session = session
        self.urls = urls
        self.servers: list[RemoteAgentServer] = []
        self.delegations: list[Delegation] = []
        self.others: Callable[[float], str | None] | None = None
        """Who else was talking to the remote agents at a moment of the run's clock (the counterpart whose
        turn was in flight), or None: the agent under test."""
        self._began: dict[str, str | None] = {}
        """Who began each conversation and task the remote agents saw (their context and task ids): the
        counterpart's name, or None for the agent under test."""

    async def start(self) -> None:
        if not self._specs:
            return
        # imported here: a2a-sdk's server side is heavy, and most suites have no remote agents
        from tamesu.remote.server import RemoteAgentServer

        # measured from the start: an agent that delegated nothing made 0 delegations, not none measured (a
        # `metric: {name: delegations, lte: 2}` failed "not measured" for it)
        self._session.count("delegations", 0)
        self._session.count("delegations_refused", 0)

        for name, spec in self._specs.items():
            try:
                token = self._session.context.render_text(spec.token) if spec.token else None
            except TemplateError as exc:
                raise InfraError(f"remote agent {name}: token: {exc}") from exc
            server = RemoteAgentServer(name, spec, self._session, token, self._record, self._refused,
                                       self._fuzzed,
                                       forwarding=self._forwarding(name, spec))
            self.servers.append(server)
            try:
                # never cut short: a gRPC server cancelled half-way through its start crashes the interpreter
                await finish(server.start(), _STOP_LIMIT)
            except OSError as exc:
                raise InfraError(str(exc)) from exc
            self.urls[name] = {"url": server.url, "grpc": server.grpc_addr,
                               "card": f"{server.origin}/.well-known/agent-card.json"}
            self._session.event("remote_agent_started", agent=name, url=server.url, grpc=server.grpc_addr,
                                **({"forward": server.forwarding.shown} if server.forwarding else {}))

    def _forwarding(self, name: str, spec: RemoteAgentSpec) -> Forwarding | None:
        if spec.forward is None:
            return None
        from tamesu.remote.forward import Forwarding

        try:
            url = self._session.context.render_url(spec.forward)
            headers = {k: self._session.context.render_text(v) for k, v in spec.headers.items()}
        except TemplateError as exc:
            raise InfraError(f"remote agent {name}: forward: {exc}") from exc
        try:
            RemoteAgentSpec.model_validate({"forward": url, "tls": spec.tls})
        except ValueError as exc:  # written as a template: checked as it rendered
            problem = str(exc.errors()[0]["msg"]) if isinstance(exc, ValidationError) else str(exc)
            raise InfraError(f"remote agent {name}: {problem.removeprefix('Value error, ')}") from None
        return Forwarding(url=url, headers=headers, tls=spec.tls)

    async def stop(self) -> None:
        servers, self.servers = list(reversed(self.servers)), []
        cancelled = False
        for server in servers:
            try:
                # to its end even when the run is being cancelled: a gRPC server left running crashes the exit
                await finish(server.stop(), _STOP_LIMIT)
            except asyncio.CancelledError:
                cancelled = True
            except Exception:
                pass
        if cancelled:
            raise asyncio.CancelledError

    def forward_failure(self) -> str | None:
        """Why a `forward` could not reach the real agent it names, or None: tamesu's proxy answered 502 in its
        place, so what the agent under test did next is no test of it (the setup is broken, as a hook's is)."""
        failed = next((e for e in self._session.events if e.name == "forward_failed"), None)
        if failed is None:
            return None
        return (f"remote agent {failed.data.get('agent')}: forward to {failed.data.get('url')}: "
                f"{failed.data.get('error')}")

    def _sender(self, delegation: Delegation) -> str | None:
        """Who sent a message: the side that began the conversation or task it goes on with, else the side whose
        turn it came in (both agents may call the same remote agent; ids are made afresh for each new one)."""
        ids = [f"{kind}:{value}" for kind, value in (("context", delegation.context_id),
                                                      ("task", delegation.task_id)) if value]
        known = [self._began[key] for key in ids if key in self._began]
        sender = known[0] if known else self.others(delegation.at_ms) if self.others is not None else None
        for key in ids:
            self._began.setdefault(key, sender)
        return sender

    def _record(self, delegation: Delegation) -> None:
        if (other := self._sender(delegation)) is not None:
            self._session.count("counterpart_delegations")
            self._session.event("counterpart_delegated", counterpart=other, agent=delegation.agent,
                                message=delegation.message, reply=delegation.reply, state=delegation.state)
            return
        self.delegations.append(delegation)
        self._session.count("delegations")
        self._session.event("delegated", agent=delegation.agent, message=delegation.message,
                            reply=delegation.reply, state=delegation.state, binding=delegation.binding,
                            version=delegation.version, task_id=delegation.task_id,
                            **({"fuzzed": delegation.fuzzed} if delegation.fuzzed else {}),
                            **({"forwarded": delegation.forwarded} if delegation.forwarded else {}))

    def _fuzzed(self, delegation: Delegation, mode: str) -> None:
        # a call the counterpart made met the fault: not one the agent under test saw (`tools_fuzzed` is its)
        if (other := self._sender(delegation)) is not None:
            self._session.count("counterpart_tools_fuzzed")
            self._session.event("counterpart_tool_fuzzed", counterpart=other, tool=delegation.agent, mode=mode)
            return
        self._session.event("tool_fuzzed", tool=delegation.agent, mode=mode)
        self._session.count("tools_fuzzed")

    def _refused(self, agent: str, binding: str) -> None:
        # refused before its message was read: no ids, so whose turn it came in says whose it is
        if self.others is not None and (other := self.others(self._session.now_ms())) is not None:
            self._session.count("counterpart_delegations_refused")
            self._session.event("counterpart_delegation_refused", counterpart=other, agent=agent, binding=binding,
                                reason="no valid bearer token")
            return
        self._session.count("delegations_refused")
        self._session.event("delegation_refused", agent=agent, binding=binding, reason="no valid bearer token")

    def attach(self, exchanges: list[Exchange]) -> None:
        """Each delegation as a tool call of the turn it happened in: the last turn sent before it."""
        for delegation in self.delegations:
            owner = None
            for exchange in exchanges:
                if exchange.agent.sent_at_ms <= delegation.at_ms:
                    owner = exchange
            if owner is None:
                if not exchanges:
                    continue
                owner = exchanges[0]  # sent while the agent under test started up: the first turn owns it
            owner.agent.tool_calls.append(as_tool_call(delegation, owner.index))


def as_tool_call(delegation: Delegation, turn: int | None = None) -> ToolCall:
    result: object = delegation.reply
    if delegation.reply_data is not None:
        result = {"text": delegation.reply, "data": delegation.reply_data}
    return ToolCall(name=delegation.agent, kind="delegation", turn=turn,
                    args={"message": delegation.message, **({"data": delegation.data} if delegation.data else {})},
                    result=result)
