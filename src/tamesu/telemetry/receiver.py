"""An OTLP/HTTP trace receiver for the run's duration: `POST /v1/traces`, protobuf or JSON, gzip or not (metrics
and logs are answered and dropped).

The agent exports to it as to any collector (`OTEL_EXPORTER_OTLP_ENDPOINT`). The answer is OTLP's: an empty
`ExportTraceServiceResponse` in the request's encoding, 400 with one line for a body that is no export.

An exporter speaking OTLP over gRPC (HTTP/2: its connection opens with the HTTP/2 preface; or a request of
content type `application/grpc`) is refused, and the run says so in one line (`Dropped.grpc_exports`): its
connection is closed at once (its call fails UNAVAILABLE), an `application/grpc` request is answered 415 with the
line. Before, uvicorn logged "Invalid HTTP request received." to tamesu.log and nothing else said it. No HTTP/2 is
spoken here to word the refusal in gRPC's own terms: that would be a protocol of tamesu's own.
"""

from __future__ import annotations

import asyncio
import zlib

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from tamesu.errors import InfraError
from tamesu.net.serve import LoopServer
from tamesu.telemetry._dropped import GRPC_REFUSED
from tamesu.telemetry.collector import SpanCollector
from tamesu.telemetry.spans import BadExport, decode
from tamesu.types import split_addr

MAX_BODY = 32 * 1024 * 1024
"""One export request's body, decompressed: a bigger one is refused (413), not read into memory."""


class ReceiverError(InfraError):
    """The receiver cannot listen where `traces.receive` says."""


def _inflated(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise BadExport(f"content-encoding {encoding!r} is not read (gzip, deflate or none)")
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        data = inflater.decompress(body, MAX_BODY + 1)
    except zlib.error as exc:
        raise BadExport(f"the {encoding} body cannot be read: {exc}") from None
    if len(data) > MAX_BODY:
        raise _TooLarge
    return data


class _TooLarge(Exception):
    pass


_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""How an HTTP/2 client with prior knowledge (gRPC's exporters) opens its connection (RFC 9113 3.4)."""


def _protocol(collector: SpanCollector) -> type[asyncio.Protocol]:
    class Protocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]  # uvicorn's choice: h11 or httptools
        _first = True

        def data_received(self, data: bytes) -> None:
            if self._first:
                self._first = False
                if data.startswith(_PREFACE[:16]):  # the run's warning says what to set
                    collector.dropped.grpc_exports += 1
                    self.transport.close()
                    return
            super().data_received(data)

    return Protocol


def app(collector: SpanCollector) -> Starlette:
    async def traces(request: Request) -> Response:
        content_type = request.headers.get("content-type", "application/x-protobuf")
        if content_type.lower().startswith("application/grpc"):
            collector.dropped.grpc_exports += 1
            return Response(f"{GRPC_REFUSED}\n", status_code=415, media_type="text/plain")
        as_json = "json" in content_type.lower()
        if int(request.headers.get("content-length") or 0) > MAX_BODY:
            return Response("body too large\n", status_code=413, media_type="text/plain")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return Response("body too large\n", status_code=413, media_type="text/plain")
        try:
            export = decode(_inflated(body, request.headers.get("content-encoding", "")), content_type)
        except BadExport as exc:
            return Response(f"{exc}\n", status_code=400, media_type="text/plain")
        except _TooLarge:
            return Response("body too large\n", status_code=413, media_type="text/plain")
        collector.take(export.spans)
        collector.dropped.rejected_spans += export.rejected
        collector.dropped.rejected_why = collector.dropped.rejected_why or export.why
        collector.dropped.cut_values += export.cut
        # OTLP's partial success: the exporter is told how many spans were left out and why, the rest are kept
        answer = ExportTraceServiceResponse()
        if export.rejected:
            answer.partial_success.rejected_spans = export.rejected
            answer.partial_success.error_message = export.why
        if as_json:
            return Response(json_format.MessageToJson(answer, indent=None) if export.rejected else "{}",
                            media_type="application/json")
        return Response(answer.SerializeToString(), media_type="application/x-protobuf")

    async def other_signal(request: Request) -> Response:
        # the endpoint variable is the general one, so an agent that also exports metrics or logs sends them
        # here: taken and dropped unread (an empty answer is OTLP's success for every signal), not a 404 in the
        # agent's log at every export
        async for _ in request.stream():
            pass
        if "json" in request.headers.get("content-type", "").lower():
            return Response("{}", media_type="application/json")
        return Response(b"", media_type="application/x-protobuf")

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"]),
                             Route("/v1/metrics", other_signal, methods=["POST"]),
                             Route("/v1/logs", other_signal, methods=["POST"])])


class Receiver:
    """The receiver for one `receive` address, serving while the run needs it."""

    def __init__(self, addr: str, collector: SpanCollector) -> None:
        self.addr = addr
        self.collector = collector
        self._server: LoopServer | None = None

    @property
    def endpoint(self) -> str:
        """What OTEL_EXPORTER_OTLP_ENDPOINT says (the exporter adds `/v1/traces`)."""
        assert self._server is not None
        return self._server.url  # 127.0.0.1 for a receiver on every interface: 0.0.0.0 is no address to call

    async def start(self) -> Receiver:
        host, port = split_addr(self.addr)
        try:
            self._server = await LoopServer(app(self.collector), host, port,
                                            http=_protocol(self.collector)).start()
        except (OSError, SystemExit) as exc:
            words = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ReceiverError(f"traces.receive: cannot listen on {self.addr}: {words}") from None
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None
