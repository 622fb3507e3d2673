"""An a2a-sdk client pinned to one of an agent's interfaces, for the tests that talk A2A to tamesu's agents."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.transports.grpc import GrpcTransport
from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
from a2a.types.a2a_pb2 import TaskPushNotificationConfig


@asynccontextmanager
async def pinned_client(origin: str, binding: str, version: str, *, streaming: bool = False,
                        push: TaskPushNotificationConfig | None = None) -> AsyncIterator[Client]:
    """A client that can only speak `binding` at `version`: the card at `origin` is cut down to that one
    interface. No credentials on the client itself: each call says whether it carries a token."""
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, origin).get_agent_card()
        chosen = [i for i in card.supported_interfaces
                  if i.protocol_binding == binding and i.protocol_version == version]
        assert len(chosen) == 1, f"the card lists {binding} {version} {len(chosen)} times"
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(chosen)
        # grpc dials both forms the card writes: a bare host:port (1.0) and dns://HOST:PORT/HOST:PORT (0.3)
        config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding],
                              grpc_channel_factory=grpc.aio.insecure_channel, push_notification_config=push)
        factory = ClientFactory(config)
        if binding == "GRPC":
            # the factory finds the 0.3 gRPC transport through an import that fails quietly once a2a's server
            # modules are loaded (as other test modules do): it would then speak 1.0 to a 0.3 interface
            transport = CompatGrpcTransport if version == "0.3" else GrpcTransport
            factory.register("GRPC", lambda card, url, config: transport.create(card, url, config))
        client = factory.create(card)
        try:
            yield client
        finally:
            await client.close()
