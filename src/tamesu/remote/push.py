"""Push notifications in the shape the caller's protocol version expects.

a2a-sdk's sender posts every task event as a 1.0 `StreamResponse` (`{"task": ...}`, `{"statusUpdate": ...}`),
whatever version the caller spoke. A 0.3 caller's listener expects the 0.3 shape instead: the task itself
(`{"kind": "task", "status": {"state": "completed"}, ...}`). So the config store remembers which version set
each config (`VersionedConfigStore`), and the sender (`VersionedPushSender`) keeps the SDK's posting for 1.0
callers and posts a 0.3 caller the whole task, once each time it settles (finished, or waiting for input or
auth), with the caller's token in `X-A2A-Notification-Token` either way. Both are posted here, so a post the
caller's listener refuses or never takes is said (`failed`: a `push_failed` event), not only logged: an
orchestrator waiting for a notification it refused would otherwise wait with nothing in the run to say why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
from a2a.compat.v0_3.conversions import to_compat_task
from a2a.server.context import ServerCallContext
from a2a.server.tasks import BasePushNotificationSender, InMemoryPushNotificationConfigStore, TaskStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types.a2a_pb2 import Task, TaskPushNotificationConfig, TaskState, TaskStatusUpdateEvent
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from tamesu.net.clients import os_reason
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
    def __init__(self, client: httpx.AsyncClient, configs: VersionedConfigStore, tasks: TaskStore,
                 failed: Callable[[str, str, str], None]) -> None:
        super().__init__(client, configs)
        self._configs = configs
        self._tasks = tasks
        self._http = client
        self._failed = failed
        """Told (task id, listener URL, why) of each post that did not reach the caller's listener."""

    async def _dispatch_notification(self, event: PushNotificationEvent, push_info: TaskPushNotificationConfig,
                                     task_id: str) -> bool:
        if self._configs.version_of(push_info) != "0.3":
            return await self._post(push_info, task_id, MessageToDict(to_stream_response(event)))
        if isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state in SETTLED:
            # the store's copy: the event alone lacks the artifacts and history a 0.3 listener reads
            task = await self._tasks.get(task_id, ServerCallContext())
            if task is None:
                return False
            return await self._post(push_info, task_id,
                                    to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True))
        return True  # a 0.3 listener hears of the task when it settles, not of each artifact chunk

    async def _post(self, push_info: TaskPushNotificationConfig, task_id: str, body: object) -> bool:
        headers = {"X-A2A-Notification-Token": push_info.token} if push_info.token else {}
        if push_info.HasField("authentication") and push_info.authentication.credentials:
            auth = push_info.authentication
            headers["Authorization"] = f"{auth.scheme or 'Bearer'} {auth.credentials}"
        try:
            response = await self._http.post(push_info.url, json=body, headers=headers)
            response.raise_for_status()
        except httpx.HTTPError as exc:  # best effort, as the SDK's own sender: the task is not disturbed
            log.warning("push notification for task %s to %s failed: %s", task_id, push_info.url, exc)
            self._failed(task_id, push_info.url, _why(exc))
            return False
        return True


def _why(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        return f"HTTP {status} {exc.response.reason_phrase}".rstrip() + ": the listener refused it"
    return f"{type(exc).__name__}: {os_reason(exc)}"
