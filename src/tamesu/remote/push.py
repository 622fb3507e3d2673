"""Push notifications in the shape the caller's protocol version expects.

a2a-sdk's sender posts every task event as a 1.0 `StreamResponse` (`{"task": ...}`, `{"statusUpdate": ...}`),
whatever version the caller spoke. A 0.3 caller's listener expects the 0.3 shape instead: the task itself
(`{"kind": "task", "status": {"state": "completed"}, ...}`). So the config store remembers which version set
each config (`VersionedConfigStore`), and the sender (`VersionedPushSender`) keeps the SDK's posting for 1.0
callers and posts a 0.3 caller the whole task, once each time it settles (finished, or waiting for input or
auth), with the caller's token in `X-A2A-Notification-Token` either way.
"""

from __future__ import annotations

import logging

import httpx
from a2a.compat.v0_3.conversions import to_compat_task
from a2a.server.context import ServerCallContext
from a2a.server.tasks import BasePushNotificationSender, InMemoryPushNotificationConfigStore, TaskStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types.a2a_pb2 import Task, TaskPushNotificationConfig, TaskState, TaskStatusUpdateEvent

from tamesu.remote._binding import binding_of

log = logging.getLogger(__name__)

SETTLED = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
                     TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_INPUT_REQUIRED,
                     TaskState.TASK_STATE_AUTH_REQUIRED})


class VersionedConfigStore(InMemoryPushNotificationConfigStore):
    """The SDK's in-memory store, also noting the protocol version of the request that set each config."""

    def __init__(self) -> None:
        super().__init__()
        self._versions: dict[tuple[str, str], str] = {}

    async def set_info(  # type: ignore[override]  # the SDK's store says it never answers None
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: ServerCallContext,
    ) -> TaskPushNotificationConfig | None:
        # keyed by URL: the config id may be defaulted by the store, the URL is what the caller gave
        self._versions[(task_id, notification_config.url)] = binding_of(context)[1]
        return await super().set_info(task_id, notification_config, context)

    def version_of(self, config: TaskPushNotificationConfig) -> str:
        return self._versions.get((config.task_id, config.url), "1.0")


class VersionedPushSender(BasePushNotificationSender):
    def __init__(self, client: httpx.AsyncClient, configs: VersionedConfigStore, tasks: TaskStore) -> None:
        super().__init__(client, configs)
        self._configs = configs
        self._tasks = tasks
        self._http = client

    async def _dispatch_notification(self, event: PushNotificationEvent, push_info: TaskPushNotificationConfig,
                                     task_id: str) -> bool:
        if self._configs.version_of(push_info) != "0.3":
            return await super()._dispatch_notification(event, push_info, task_id)
        if isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state in SETTLED:
            return await self._post_v03_task(push_info, task_id)
        return True  # a 0.3 listener hears of the task when it settles, not of each artifact chunk

    async def _post_v03_task(self, push_info: TaskPushNotificationConfig, task_id: str) -> bool:
        # the store's copy: the event alone lacks the artifacts and history a 0.3 listener reads
        task = await self._tasks.get(task_id, ServerCallContext())
        if task is None:
            return False
        headers = {"X-A2A-Notification-Token": push_info.token} if push_info.token else {}
        if push_info.HasField("authentication") and push_info.authentication.credentials:
            auth = push_info.authentication
            headers["Authorization"] = f"{auth.scheme or 'Bearer'} {auth.credentials}"
        body = to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            response = await self._http.post(push_info.url, json=body, headers=headers)
            response.raise_for_status()
        except httpx.HTTPError as exc:  # best effort, as the SDK's own sender: the task is not disturbed
            log.warning("push notification for task %s to %s failed: %s", task_id, push_info.url, exc)
            return False
        return True
