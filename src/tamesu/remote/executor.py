"""What a remote agent does with each message: answer from its script (or as `fuzz_tools` says), and record it.

Every message that reaches the executor is a delegation: it is recorded with the reply and the binding it came in
on (`Delegation`), as a `delegated` event and in the `delegations` metric. A message the SDK refuses before the
executor sees it (a follow-up to a finished or unknown task, a message without parts) is one too, in the state
`error` with the error as its reply (`refused_delegation`), as `forward` records a real agent's refusal. Replies
are shaped so the usual readers find them: a completed task carries the answer as a `reply` artifact (a text part,
and a data part when the script gives data); a task that waits (input-required, auth-required) or ends badly
(failed, rejected) carries it as its status message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState, TaskStatus
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from pydantic import BaseModel

from tamesu.conversation import Session
from tamesu.fuzzing import fuzz_for
from tamesu.matching import one_line
from tamesu.remote._binding import binding_of
from tamesu.suite.remote_agents import RemoteAgentSpec, ReplySpec
from tamesu.types import whole_numbers


class Delegation(BaseModel):
    """One message the agent under test sent a remote agent, and what it got back."""

    agent: str
    message: str
    data: list[Any] = []
    reply: str = ""
    reply_data: object = None
    state: str = "completed"
    binding: str = "unknown"
    version: str = "1.0"
    task_id: str = ""
    context_id: str = ""
    at_ms: float = 0.0
    fuzzed: str | None = None
    forwarded: str | None = None
    """With `forward`: the real agent's URL the message went on to (its reply is the real agent's)."""


Fuzzed = Callable[[Delegation, str], None]
"""Told of a delegation met by `fuzz_tools` (and its mode) as it happens: the group says whose call it was."""


def message_text(message: Message) -> tuple[str, list[object]]:
    texts: list[str] = []
    data: list[object] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            data.append(whole_numbers(MessageToDict(part.data)))
        elif kind in ("raw", "url"):
            texts.append(f"[{part.filename or 'file'}]")
    return " ".join(texts), data


_EXECUTED = "tamesu_executed"
"""Set on a request's call context once the executor has recorded its message (`refused_delegation`)."""


def refused_delegation(name: str, message: Message, context: ServerCallContext, error: A2AError,
                       at_ms: float) -> Delegation | None:
    """A message the SDK's handler refused, as a delegation that failed; None when the executor already recorded
    it (the error came after the answer began)."""
    if context.state.get(_EXECUTED):
        return None
    text, data = message_text(message)
    binding, version = binding_of(context)
    code = JSON_RPC_ERROR_CODE_MAP.get(type(error))
    said = one_line(str(error.message), 500)
    return Delegation(agent=name, message=text, data=data, reply=f"error {code}: {said}" if code else said,
                      state="error", binding=binding, version=version, task_id=message.task_id,
                      context_id=message.context_id, at_ms=at_ms)


def _parts(text: str | None, data: Any, with_data: bool) -> list[Part]:
    parts = [Part(text=text)] if text is not None else []
    if with_data:
        parts.append(Part(data=ParseDict(data, struct_pb2.Value())))
    return parts


class ScriptedExecutor(AgentExecutor):
    def __init__(self, name: str, spec: RemoteAgentSpec, session: Session,
                 record: Callable[[Delegation], None], fuzzed: Fuzzed) -> None:
        self._name = name
        self._spec = spec
        self._session = session
        self._record = record
        self._fuzzed = fuzzed

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is not None and context.current_task.context_id:
            # a follow-up that names the task but no contextId: the SDK makes a context id up, and the task
            # manager then rejects the events ("Context in event doesn't match"); the task's own context is right
            context_id = context.current_task.context_id
        message = context.message or Message()
        if context.call_context is not None:
            context.call_context.state[_EXECUTED] = True
        if context.current_task is None:  # the SDK wants the task before any update
            await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, history=[message],
                                                 status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        text, data = message_text(message)
        binding, version = binding_of(context.call_context)
        delegation = Delegation(agent=self._name, message=text, data=data, binding=binding, version=version,
                                task_id=task_id, context_id=context_id, at_ms=self._session.now_ms())
        try:
            reply = await self._reply(text, data, delegation)
        except asyncio.CancelledError:
            # given up while `fuzz_tools` held the answer (`delay`): the caller left, or the run ended first. It was
            # a delegation all the same; unrecorded, `delegated_to` said "delegated to: none" of an agent that did
            fuzz = fuzz_for(self._session, self._name)
            held = f" ({fuzz.mode} {fuzz.hold_seconds():g}s)" if fuzz is not None else ""
            delegation.state = "canceled"
            delegation.reply = f"no answer: the call was given up while fuzz_tools held it{held}"
            self._record(delegation)
            raise
        delegation.reply, delegation.state = reply.say or "", reply.state
        with_data = "data" in reply.model_fields_set
        delegation.reply_data = reply.data if with_data else None
        # recorded before the answer leaves, so the delegation is known when the agent under test hears back
        self._record(delegation)
        parts = _parts(reply.say, reply.data, with_data)
        if reply.state == "completed":
            if parts:
                await updater.add_artifact(parts, name="reply")
            await updater.complete()
            return
        status_message = updater.new_agent_message(parts or [Part(text="")])
        if reply.state == "input-required":
            await updater.requires_input(status_message)
        elif reply.state == "auth-required":
            await updater.requires_auth(status_message)
        elif reply.state == "rejected":
            await updater.reject(status_message)
        else:
            await updater.failed(status_message)

    async def _reply(self, text: str, data: Sequence[object], delegation: Delegation) -> ReplySpec:
        # as written: `Müller`, not `M\u00fcller`
        searched = " ".join([text, *(json.dumps(d, sort_keys=True, ensure_ascii=False) for d in data)])
        fuzz = fuzz_for(self._session, self._name)
        if fuzz is None:
            return self._spec.answer(searched)
        delegation.fuzzed = fuzz.mode
        self._fuzzed(delegation, fuzz.mode)
        if fuzz.mode == "error":
            return ReplySpec(say=fuzz.error_message(), state="failed")
        if fuzz.mode == "empty":
            return ReplySpec(say="")
        if fuzz.mode == "hostile":
            return ReplySpec(say=fuzz.hostile_text())
        if fuzz.mode == "delay":
            await asyncio.sleep(fuzz.hold_seconds())
            return self._spec.answer(searched)
        answer: dict[str, object] = {"say": fuzz.text}
        if "data" in fuzz.model_fields_set:
            answer["data"] = fuzz.data
        return ReplySpec.model_validate(answer) if fuzz.text is not None or "data" in answer else ReplySpec(say="")

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()
