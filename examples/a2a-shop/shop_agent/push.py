"""Push notifications: when a task settles, the whole task goes to every URL its client registered.

a2a-sdk's own sender posts every event, in A2A 1.0's shape, to every client, and waits for each post before the
task moves on. The shop posts only when a task settles (completed, failed, canceled, rejected, or waiting for
input or sign-in), in the shape of the version the client spoke:

    A2A 1.0   a StreamResponse holding the task: {"task": {"id": ..., "status": {"state": "TASK_STATE_COMPLETED"}}}
    A2A 0.3   the Task itself:                    {"kind": "task", "id": ..., "status": {"state": "completed"}}

with the client's token in X-A2A-Notification-Token (and its credentials in Authorization, when it gave some),
from a background task, so a slow listener never holds up the conversation.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
from a2a.compat.v0_3.conversions import to_compat_task
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryPushNotificationConfigStore, PushNotificationEvent, PushNotificationSender
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import StreamResponse, Task, TaskPushNotificationConfig, TaskState, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict

from shop_agent.wire import Version, wire_version

logger = logging.getLogger(__name__)

SETTLED = frozenset({
    TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED,
})


class VersionedPushConfigStore(InMemoryPushNotificationConfigStore):
    """The SDK's in-memory store, also remembering which protocol version registered each config."""

    def __init__(self) -> None:
        super().__init__()
        self._versions: dict[tuple[str, str], Version] = {}
        self._task_versions: dict[str, Version] = {}

    async def set_info(self, task_id: str, notification_config: TaskPushNotificationConfig,
                       context: ServerCallContext) -> TaskPushNotificationConfig | None:
        version = wire_version(context)
        # known before the config is: a task that settles at once may be pushed while set_info is still running
        self._task_versions[task_id] = version
        stored = await super().set_info(task_id, notification_config, context)
        config_id = stored.id if stored is not None else (notification_config.id or task_id)
        self._versions[(task_id, config_id)] = version
        return stored

    def version_of(self, task_id: str, config_id: str) -> Version:
        return self._versions.get((task_id, config_id)) or self._task_versions.get(task_id, "1.0")


def push_body(task: Task, version: Version) -> dict[str, Any]:
    if version == "0.3":
        return to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True)
    return MessageToDict(StreamResponse(task=task))


class SettledTaskPushSender(PushNotificationSender):
    def __init__(self, tasks: TaskStore, configs: VersionedPushConfigStore, timeout: float = 5.0) -> None:
        self._tasks = tasks
        self._configs = configs
        self._client = httpx.AsyncClient(timeout=timeout)
        self._posting: set[asyncio.Task[None]] = set()

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        if not isinstance(event, Task | TaskStatusUpdateEvent) or event.status.state not in SETTLED:
            return
        configs = await self._configs.get_info_for_dispatch(task_id)
        if not configs:
            return
        # The store already holds the task as this event left it (the SDK saves before it notifies); a fresh
        # context reads the same owner partition the unauthenticated shop clients write to.
        task = await self._tasks.get(task_id, ServerCallContext())
        if task is None:
            return
        for config in configs:
            body = push_body(task, self._configs.version_of(task_id, config.id))
            job = asyncio.create_task(self._post(config, body), name=f"push:{task_id}")
            self._posting.add(job)
            job.add_done_callback(self._posting.discard)

    async def _post(self, config: TaskPushNotificationConfig, body: dict[str, Any]) -> None:
        headers: dict[str, str] = {}
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        if config.HasField("authentication") and config.authentication.scheme and config.authentication.credentials:
            headers["Authorization"] = f"{config.authentication.scheme} {config.authentication.credentials}"
        try:
            response = await self._client.post(config.url, json=body, headers=headers)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            # best effort, as the protocol allows: the client can still read the task with tasks/get
            logger.warning("push notification to %s failed: %s", config.url, exc)

    async def aclose(self, grace: float = 2.0) -> None:
        """Let the posts under way finish (for `grace` seconds at most), then close the client."""
        if self._posting:
            _, late = await asyncio.wait(set(self._posting), timeout=grace)
            for job in late:
                job.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self._client.aclose()
