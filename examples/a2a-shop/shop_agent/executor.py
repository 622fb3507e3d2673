"""The A2A side of the shop: parts in, task events out.

Every request runs the same way, whether the client asked with message/send or message/stream (the executor
cannot tell, and need not: the SDK keeps the events of a send to itself and answers with the task):

1. a new task is enqueued first (submitted, with the user's message), as the SDK requires before any update;
   a follow-up to a task waiting for input reuses it;
2. working;
3. a completed answer streams as the `reply` artifact, one word per event (append), and its last event
   replaces those chunks with the whole sentence (lastChunk), so the task as it finally stands holds one text
   part; then one artifact per record (`order`, `return`, `orders`) with a data part; then completed;
4. a question ends in input-required (or auth-required) with the question as the status message.
"""

from __future__ import annotations

import asyncio
import uuid

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
)
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict

from shop_agent.logic import FileIn, Incoming, Pending, Reply, Shop
from shop_agent.wire import bearer_matches, presented_authorization


class ShopExecutor(AgentExecutor):
    def __init__(self, shop: Shop, token: str, word_delay: float = 0.02) -> None:
        self._shop = shop
        self._token = token
        self._word_delay = word_delay
        # what each task in input-required or auth-required waits for, by task id
        self._pending: dict[str, Pending] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        message = context.message or Message()
        if context.current_task is None:
            await event_queue.enqueue_event(Task(
                id=task_id, context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[message],
            ))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        signed_in = bearer_matches(presented_authorization(context.call_context), self._token)
        reply = self._shop.answer(_incoming(message, signed_in), self._pending.pop(task_id, None))
        if reply.state == "completed":
            await self._finish(updater, reply)
            return
        if reply.pending is not None:
            self._pending[task_id] = reply.pending
        question = updater.new_agent_message([Part(text=reply.text)])
        if reply.state == "auth-required":
            await updater.requires_auth(question)
        else:
            await updater.requires_input(question)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = str(context.task_id)
        self._pending.pop(task_id, None)
        await TaskUpdater(event_queue, task_id, str(context.context_id)).cancel()

    async def _finish(self, updater: TaskUpdater, reply: Reply) -> None:
        reply_id = f"reply-{uuid.uuid4().hex[:12]}"
        for index, word in enumerate(reply.text.split(" ")):
            await self._chunk(updater, reply_id, word if index == 0 else f" {word}", append=index > 0)
            await asyncio.sleep(self._word_delay)
        await self._chunk(updater, reply_id, reply.text, append=False, last_chunk=True)
        for name, data in reply.artifacts:
            await updater.add_artifact([Part(data=ParseDict(data, struct_pb2.Value()))], name=name)
        await updater.complete()

    @staticmethod
    async def _chunk(updater: TaskUpdater, artifact_id: str, text: str, *, append: bool,
                     last_chunk: bool = False) -> None:
        await updater.event_queue.enqueue_event(TaskArtifactUpdateEvent(
            task_id=updater.task_id, context_id=updater.context_id,
            artifact=Artifact(artifact_id=artifact_id, name="reply", parts=[Part(text=text)]),
            append=append, last_chunk=last_chunk,
        ))


def _incoming(message: Message, signed_in: bool) -> Incoming:
    texts: list[str] = []
    data: list[dict[str, object]] = []
    files: list[FileIn] = []
    history: list[tuple[str, str]] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            value = MessageToDict(part.data)
            if isinstance(value, dict) and set(value) == {"history"} and isinstance(value["history"], list):
                # a client that hands over the conversation so far (tamesu's stateless tests do)
                history = [(str(m.get("role", "")), str(m.get("text", ""))) for m in value["history"]
                           if isinstance(m, dict)]
            elif isinstance(value, dict):
                data.append(value)
        elif kind == "raw":
            files.append(FileIn(name=part.filename or "a file", size=len(part.raw)))
        elif kind == "url":
            files.append(FileIn(name=part.filename or part.url.rsplit("/", 1)[-1] or part.url, uri=part.url))
    return Incoming(text=" ".join(texts), data=data, files=files, signed_in=signed_in, history=history)
