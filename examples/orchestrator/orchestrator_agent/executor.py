"""What the orchestrator says: it routes each customer message to billing or shipping and relays the answer.

Refunds, invoices and charges go to billing; tracking and delivery to shipping (over the remote agent's A2A
endpoint); anything else gets a short menu. When the remote agent cannot help, the customer is told plainly,
with no internals, and offered a way forward. The remote agents' URLs come from the message's metadata
(`billing_url`, `shipping_url`: how a test points the orchestrator at its stand-ins) or the environment
(`BILLING_AGENT_URL`, `SHIPPING_AGENT_URL`); the shipping token from `SHIPPING_AGENT_TOKEN`.
"""

from __future__ import annotations

import os
import re

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from orchestrator_agent.delegate import ask

ROUTES = (
    ("billing", re.compile(r"(?i)refund|invoice|charge|bill")),
    ("shipping", re.compile(r"(?i)track|where is|deliver|ship|arriv")),
)
MENU = "I can help with refunds and invoices, or track an order. What do you need?"


def _remote(name: str, metadata: dict[str, object]) -> tuple[str | None, str | None]:
    url = metadata.get(f"{name}_url") or os.environ.get(f"{name.upper()}_AGENT_URL")
    token = os.environ.get(f"{name.upper()}_AGENT_TOKEN")
    return (str(url) if url else None), token


async def reply_to(text: str, metadata: dict[str, object]) -> str:
    for name, pattern in ROUTES:
        if not pattern.search(text):
            continue
        url, token = _remote(name, metadata)
        if url is None:
            return f"Our {name} team is not reachable from here right now. Please try again later."
        answer = await ask(url, text, token)
        if answer.ok:
            return answer.text or f"The {name} team has your request."
        return (f"Sorry, our {name} service is unavailable at the moment, so I could not complete that. "
                "Nothing has been changed. Please try again in a little while, or ask for a person.")
    return MENU


class OrchestratorExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message or Message()
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, history=[message],
                                                 status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        text = " ".join(p.text for p in message.parts if p.text)
        metadata = MessageToDict(message.metadata) if message.HasField("metadata") else {}
        answer = await reply_to(text, metadata)
        await updater.add_artifact([Part(text=answer)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()
