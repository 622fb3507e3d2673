"""The `mcp` target: an MCP server's tools, offered to a driving model that talks with the user.

The server is reached one of three ways:
- `command` (with `args`, `env`): tamesu starts it for each run and speaks MCP over its stdin and stdout. It
  runs in the suite's folder and sees PATH, HOME and a few other variables of tamesu's environment, plus
  `env`. tamesu reads its stdout itself (`_mcp_stdio`), so no answer is held past `max_response_bytes`.
- `url` (with `headers`): a running server, over streamable HTTP.
- `command` and `url` together: tamesu starts the command, waits until `url` accepts connections, and speaks
  streamable HTTP to it. `{{session.port}}` is a free port chosen for the run, to put in both.
Every string of these keys is a template (`{{secrets.X}}`, `{{vars.x}}`, `{{env.X}}`).

When the session opens, the server's tools are listed (every page) and offered to the model (`model`, a name
under `models:` or a shorthand, default `models.target`), narrowed by `allow_tools` (names or `*` globs; an
entry that matches no tool of the server fails the start, since a typo would quietly offer nothing). The
system prompt is `system` (or `system_file`); without one, tamesu's own short prompt (`mcp_system.v1.txt`
beside this module, recorded as `mcp_system.v1`). The server's `instructions`, when it gives some, follow it.
The conversation loop is the model target's: the same `temperature`, `max_tokens`, `max_tool_rounds`,
`fallback`, `turn_timeout` and `handoff`; only the tools differ.

Each tool call of the model is recorded (AgentTurn.tool_calls, a `tool_call` event, then a `tool_result`
event with its outcome, duration and the server's raw result) and answered so:
- a tool the model was not offered (not listed, or left out by `allow_tools`) never reaches the server: the
  model gets `{"error": "no tool named X"}` and the event says why (`refused`);
- a tool the test names in `fuzz_tools` misbehaves as the mode says (`tamesu.fuzzing`);
- a call whose arguments are no JSON object never reaches the server (`tool_arguments_invalid`, as the model
  target's);
- otherwise the server is called, bounded by `call_timeout` (default 30s). Its answer is the content's text
  (parsed when it is a JSON object or array; the structured content when there is no content). A result
  marked as an error, a protocol error (an unknown tool, bad arguments) and a call that timed out are given to
  the model as `{"error": ...}` so it can react, as a host would.

What fails what:
- the server cannot be started, exits or hangs before its tools are listed, or cannot be reached at `url`
  (after `connect.attempts`, each bounded by `connect.timeout`): InfraError (exit 3), with the end of its
  stderr (kept in the run's artifacts as `mcp-server.log`);
- the server closes the connection during the run (it crashed): TurnError, the run fails, since the server
  under test broke; over HTTP, a POST that went out on a kept-alive connection the server had just closed
  (its keep-alive time ran out) is sent again once on a new one, a `resent` event (`tamesu.net.aio`);
- a tool error, a protocol error or a call timeout does not fail the run by itself: the model saw it, and the
  assertions decide (`metric: {name: mcp_tool_errors, equals: 0}`, `pack: graceful_degradation`...).

Traces: each tools/call of a turn carries the turn's W3C `traceparent` in its `_meta` (MCP's reserved key,
SEP-414: the one carrier a stdio server has); over HTTP every request of the turn also carries it as the
`traceparent` header. A `traceparent` in `headers` wins. The driving model's own requests carry none (they
go to the model's provider, not to the server under test).

Events: `mcp_server`, `transport`, `tool_call`, `tool_result`, `tool_fuzzed`, `model_fallback`, `handoff`,
`resent`, `mcp_stray_reply` (a reply whose id no request had: over stdio, a timeout after it names it; over HTTP
the call it came for fails at once with the protocol error, `_reply_ids`).
Metrics: `mcp_tool_calls`, `mcp_tool_errors` (error results, protocol errors and timeouts), `mcp_tool_timeouts`,
`mcp_tools_refused`, `tools_fuzzed`, `model_calls`.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from tamesu.conversation import Session, ToolCall, TurnError
from tamesu.errors import InfraError, TemplateError
from tamesu.fuzzing import fuzz_for, fuzzed_call
from tamesu.matching import one_line
from tamesu.models.base import ModelResponse, ToolRequest, ToolSpec
from tamesu.net.rate_limit import RateLimit, said_as_events
from tamesu.net.urls import REFUSAL_HINTS
from tamesu.plugins import register
from tamesu.targets.mcp._names import model_names
from tamesu.targets.mcp._spec import McpTargetSpec
from tamesu.targets.mcp.errlog import MaskedLog, discard
from tamesu.targets.model import ModelTarget

if TYPE_CHECKING:  # the mcp SDK is imported only when a session opens, so loading a suite stays light
    from tamesu.targets.mcp.connection import McpConnection, ServerInfo, StdoutNoise
    from tamesu.targets.mcp.process import ServerProcess

__all__ = ["SYSTEM_PROMPT_VERSION", "McpTarget", "McpTargetSpec"]

SYSTEM_PROMPT_VERSION = "mcp_system.v1"
_STDERR_FILE = "mcp-server.log"
_STDERR_LINES = 5


def default_system(server: str) -> str:
    text = resources.files("tamesu.targets.mcp").joinpath(f"{SYSTEM_PROMPT_VERSION}.txt").read_text(encoding="utf-8")
    return Template(text).safe_substitute(server=server).strip()


@register("targets", "mcp")
class McpTarget(ModelTarget):
    kind = "mcp"
    metric_names = frozenset({"model_calls", "tool_arguments_invalid", "mcp_tool_calls", "mcp_tool_errors",
                              "mcp_tool_timeouts", "mcp_tools_refused"})
    Spec = McpTargetSpec
    model_is_the_agent = False
    session_names = frozenset({"port"})  # a server it starts, on a free port

    def __init__(self, spec: McpTargetSpec, name: str) -> None:
        super().__init__(spec, name)
        self.spec: McpTargetSpec = spec
        self._connection: McpConnection | None = None
        self._process: ServerProcess | None = None
        self._errlog: MaskedLog | None = None
        self._errlog_path: Path | None = None
        self._noise: StdoutNoise | None = None
        self._server: ServerInfo | None = None
        self._listed: set[str] = set()
        self._offered: list[ToolSpec] = []
        self._model_names: dict[str, str] = {}
        """A server tool's name -> the name the model is given (the same unless a provider would refuse it)."""
        self._server_names: dict[str, str] = {}
        self._http_errors: list[str] = []
        self._url_said = ""
        """The server's url as the lines say it (masked)."""
        """The error statuses the server answered, for messages (the SDK does not say them)."""
        self._too_large: str | None = None
        """Why the transport refused an answer (past max_response_bytes): the SDK then ends the session."""
        self._counts = {"mcp_tool_calls": 0, "mcp_tool_errors": 0, "mcp_tool_timeouts": 0, "mcp_tools_refused": 0}

    # -- open and close -------------------------------------------------------------------------------

    async def _open(self, session: Session) -> None:
        config = self._rendered(session)
        self._server = await self._connect(session, config)
        self._listed = {tool.name for tool in self._server.tools}
        self._offered = self._narrow(self._server)
        self._model_names = model_names([tool.name for tool in self._offered])
        self._server_names = {model: server for server, model in self._model_names.items()}
        fuzzed = set(session.fuzz_tools) - session.remote_agents  # a remote agent's fuzz is its own to play
        if unknown := sorted(fuzzed - self._listed):
            # a misspelt name would leave the tool working: "the tool is down" would pass untested
            raise InfraError(f"{self._what}: fuzz_tools names {', '.join(map(repr, unknown))}, which the server "
                             f"does not offer (its tools: {', '.join(sorted(self._listed)) or 'none'})")
        if withheld := sorted(fuzzed - {tool.name for tool in self._offered}):
            # never offered, never called: the test passed without its fault ever happening
            raise InfraError(f"{self._what}: fuzz_tools names {', '.join(map(repr, withheld))}, which allow_tools "
                             "does not offer the model, so it would never misbehave: offer it, or fuzz another")
        url = session.redactor.text(config["url"]) if config["url"] is not None else None
        session.event("mcp_server", transport=self.spec.transport, url=url, server=self._server.name,
                      version=self._server.version, protocol=self._server.protocol_version,
                      tools=sorted(self._listed), offered=[tool.name for tool in self._offered],
                      **({"renamed": renamed} if (renamed := {k: v for k, v in self._model_names.items()
                                                              if k != v}) else {}),
                      instructions=bool(self._server.instructions), system=self._system_source())
        await super()._open(session)

    def _rendered(self, session: Session) -> dict[str, Any]:
        """The server's keys with their templates rendered; a started HTTP server gets `{{session.port}}`."""
        spec = self.spec
        values = dict(session.values)
        if spec.command is not None and spec.url is not None:
            from tamesu.targets.mcp.process import free_port

            values.setdefault("port", free_port())
        context = session.context.child(session=values)
        raw = {"command": spec.command, "args": spec.args, "env": spec.env, "url": spec.url,
               "headers": spec.headers}
        rendered: dict[str, Any] = {}
        for key, value in raw.items():
            try:
                rendered[key] = context.render_value(value)
            except TemplateError as exc:
                raise InfraError(f"{self._what}: {key}: {exc}") from None
        rendered["args"] = [str(arg) for arg in rendered["args"]]
        rendered["env"] = {name: str(value) for name, value in rendered["env"].items()}
        rendered["headers"] = {name: str(value) for name, value in rendered["headers"].items()}
        return rendered

    async def _connect(self, session: Session, config: dict[str, Any]) -> ServerInfo:
        from tamesu.targets.mcp import connection as mcp

        session.artifacts_dir.mkdir(parents=True, exist_ok=True)
        self._errlog_path = session.artifacts_dir / _STDERR_FILE
        self._errlog = MaskedLog(self._errlog_path, session.redactor.text)
        connect = self.spec.connect

        def refused(note: str, read: int, declared: int | None) -> None:
            self._too_large = note
            session.event("response_truncated", limit=self.spec.max_response_bytes, sizes={"body": read},
                          read=read, declared=declared, complete=False, note=note)

        def resent(request: Any, reason: str) -> None:
            session.event("resent", reason=reason, url=session.redactor.text(str(request.url)),
                          method=mcp.jsonrpc_method(request.content))

        def stray(reply_id: object, waiting: list[object]) -> None:
            session.event("mcp_stray_reply", id=reply_id, waiting=waiting, note="a reply with an id no request had")

        if config["url"] is None:
            errlog = self._errlog
            noise = self._noise = mcp.StdoutNoise(errlog, stray)
            self._connection = mcp.McpConnection(lambda: mcp.stdio_transport(
                config["command"], config["args"], config["env"], session.base_dir, errlog, noise,
                self.spec.max_response_bytes, refused))
            return await self._start(self._connection, connect.timeout, "did not start")
        if config["command"] is not None:
            await self._start_process(session, config)

        self._url_said = session.redactor.text(config["url"])
        rate_limit = RateLimit(self.spec.rate_limit_retries, connect.backoff,
                               said_as_events(session.event, session.redactor.text))

        def http() -> Any:
            return mcp.http_transport(config["url"], config["headers"], connect.timeout, self._http_errors,
                                      traceparent=lambda: session.trace.traceparent if session.trace else None,
                                      max_bytes=self.spec.max_response_bytes, refused=refused,
                                      resent=resent, tls=self.spec.tls, rate_limit=rate_limit, on_stray=stray)

        for attempt in range(1, connect.attempts + 1):
            self._connection = mcp.McpConnection(http)
            try:
                return await self._start(self._connection, connect.timeout, "cannot be reached",
                                         retry=attempt < connect.attempts, attempt=attempt)
            except _Unreached as exc:
                session.event("connect_retry", attempt=attempt, attempts=connect.attempts, reason=str(exc),
                              url=session.redactor.text(config["url"]))
                await asyncio.sleep(connect.backoff)
        raise AssertionError("unreachable: the last attempt raises")  # pragma: no cover

    async def _start(self, connection: McpConnection, timeout: float, failed: str, retry: bool = False,
                     attempt: int = 0) -> ServerInfo:
        """`attempt`: which try at the url this is (0: a stdio server), said when the url was never reached."""
        from tamesu.targets.mcp.connection import NO_MCP, describe, http_statuses, is_unreached

        try:
            return await connection.start(timeout)
        except Exception as exc:
            await connection.stop()
            if retry and is_unreached(exc):
                raise _Unreached(describe(exc)) from exc
            if self._too_large is not None:  # the session ended because an answer (a listing) was refused
                raise InfraError(f"{self._what}: the MCP server {failed}: its answer was refused: {self._too_large} "
                                 "(raise the target's max_response_bytes to read it)") from None
            unlike = [e for e in self._http_errors if e.startswith(NO_MCP)]
            if unlike or "the answer is no JSON-RPC message" in describe(exc):
                # reached, and answered: a web site or another API, not an MCP server (nothing to retry)
                said = unlike[0] if unlike else "JSON that is no JSON-RPC message"
                raise InfraError(f"{self._what}: {self._url_said} is not an MCP server: it answered the session's "
                                 f"start (initialize) with {said}: does url name the MCP server's streamable HTTP "
                                 "endpoint (often /mcp)?") from None
            if missing := [e for e in self._http_errors if e.startswith(("HTTP 404", "HTTP 410"))]:
                # reached, and nothing there: "cannot be reached" sent the user to the network, not to url's path
                raise InfraError(f"{self._what}: the server at {self._url_said} answered the session's start "
                                 f"(initialize) with {missing[0]}: does url name the MCP server's streamable HTTP "
                                 "endpoint (often /mcp)?") from None
            refused = [e for e in self._http_errors if e.startswith(("HTTP 401", "HTTP 403"))]
            if refused:  # reached, and turned away for its credentials, as a tool call's 401 is said
                raise InfraError(f"{self._what}: the MCP server at {self._url_said} refused the session's start "
                                 f"(initialize): {refused[0]}: {REFUSAL_HINTS[401]}") from None
            if attempt and is_unreached(exc):  # the url, as every other target says the one it could not reach
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                failed = f"at {self._url_said} cannot be reached{tries}"
            # The SDK reports a refused request without its status; the HTTP client saw it.
            status = http_statuses(self._http_errors)
            failed = "did not answer" if isinstance(exc, TimeoutError) and failed == "cannot be reached" else failed
            raise InfraError(f"{self._what}: the MCP server {failed}: {describe(exc)}{status}"
                             f"{self._stderr_tail()}") from None

    async def _start_process(self, session: Session, config: dict[str, Any]) -> None:
        from tamesu.targets.mcp.connection import server_environment
        from tamesu.targets.mcp.process import ServerProcess

        assert self._errlog is not None
        self._process = ServerProcess(config["command"], config["args"], server_environment(config["env"]),
                                      session.base_dir, self._errlog)
        try:
            await self._process.start()
            await self._process.wait_listening(config["url"], self.spec.connect.timeout)
        except ProcessLookupError as exc:  # before OSError, which it is a kind of
            raise InfraError(f"{self._what}: {exc}{self._stderr_tail()}") from None
        except TimeoutError:  # before OSError too: it was read as the command failing to start, with no reason
            raise InfraError(f"{self._what}: the MCP server started but did not listen at its url within "
                             f"{self.spec.connect.timeout:g}s (is url's port the one the command serves?)"
                             f"{self._stderr_tail()}") from None
        except OSError as exc:
            raise InfraError(f"{self._what}: cannot start the MCP server's command: {exc.strerror or exc}") from None

    def _narrow(self, server: ServerInfo) -> list[ToolSpec]:
        tools = [ToolSpec(name=tool.name, description=tool.description or "", parameters=dict(tool.input_schema))
                 for tool in server.tools]
        patterns = self.spec.allow_tools
        if patterns is None:
            return tools
        unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(tool.name, p) for tool in tools)]
        if unmatched:
            listed = ", ".join(sorted(self._listed)) or "none"
            raise InfraError(f"{self._what}: allow_tools names {', '.join(map(repr, unmatched))}, which the "
                             f"server does not offer (its tools: {listed})")
        return [tool for tool in tools if any(fnmatch.fnmatchcase(tool.name, p) for p in patterns)]

    def _offered_tools(self) -> list[ToolSpec]:
        # under names every provider takes: MCP allows `orders.get`, OpenAI's API refuses it (HTTP 400, exit 3)
        return [tool.model_copy(update={"name": self._model_names[tool.name]}) for tool in self._offered]

    def _system_source(self) -> str:
        if self.spec.system_file is not None:
            return "system_file"
        return "system" if self.spec.system is not None else SYSTEM_PROMPT_VERSION

    def _system(self, session: Session) -> str:
        own = super()._system(session)
        server = self._server
        if not own:
            own = default_system(server.name if server and server.name else self.name)
        if server is not None and server.instructions:
            # What a host does with them: the server's own advice on using its tools goes to the model.
            own += f"\n\nThe server's instructions:\n{server.instructions.strip()}"
        return own

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.stop()
        process, self._process = self._process, None
        if process is not None:
            await process.stop()
        noise, self._noise = self._noise, None
        if noise is not None and noise.lines and self._session is not None:
            # said in the result; the lines themselves are in the server's log, not on the console
            lines = f"{noise.lines} line that is" if noise.lines == 1 else f"{noise.lines} lines that are"
            self._session.event(
                "mcp_stdout_noise", lines=noise.lines, first=self._session.redactor.text(noise.first),
                log=_STDERR_FILE, note=f"the server printed {lines} not JSON-RPC on stdout (in {_STDERR_FILE})")
        if self._errlog is not None and self._errlog_path is not None:
            discard(self._errlog_path, self._errlog)
            self._errlog = None
        await super().close()

    def _stderr_tail(self) -> str:
        path, session = self._errlog_path, self._session
        if self._errlog is not None:
            self._errlog.flush()
        if path is None or session is None or not path.exists():
            return ""
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
        tail = [line for line in lines if line][-_STDERR_LINES:]
        return f"; its stderr ends with: {session.redactor.text(' | '.join(tail))}" if tail else ""

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), **{name: float(value) for name, value in self._counts.items()}}

    # -- tool calls -----------------------------------------------------------------------------------

    def _recorded_name(self, name: str) -> str:
        return self._server_names.get(name, name)

    async def _call_tool(self, session: Session, request: ToolRequest, responses: list[ModelResponse]) -> ToolCall:
        name, args = self._recorded_name(request.name), request.arguments
        self._counts["mcp_tool_calls"] += 1
        session.event("tool_call", tool=name, args=args)
        if name not in {tool.name for tool in self._offered}:
            self._counts["mcp_tools_refused"] += 1
            reason = "not in allow_tools" if name in self._listed else "not offered by the server"
            session.event("tool_result", tool=name, outcome="refused", reason=reason, ms=0.0)
            return ToolCall(name=name, args=args, result={"error": f"no tool named {name}"})
        fuzz = fuzz_for(session, name)
        if fuzz is None:
            return await self._on_server(session, name, args)
        if fuzz.mode != "delay":
            call = await fuzzed_call(session, fuzz, name, args, lambda: self._on_server(session, name, args))
            session.event("tool_result", tool=name, outcome="fuzzed", mode=fuzz.mode, ms=0.0)
            return call
        # A slow tool, as a host meets one: call_timeout bounds the delay and the real call together.
        started = session.now_ms()
        try:
            async with asyncio.timeout(self.spec.call_timeout):
                return await fuzzed_call(session, fuzz, name, args, lambda: self._on_server(session, name, args))
        except TimeoutError:
            return self._timed_out(session, name, args, started)

    async def _on_server(self, session: Session, name: str, args: dict[str, Any]) -> ToolCall:
        from mcp.shared.exceptions import MCPError

        from tamesu.targets.mcp.connection import (
            CONNECTION_CLOSED,
            REQUEST_TIMEOUT,
            ConnectionLost,
            cause,
            describe,
            result_value,
        )

        assert self._connection is not None
        started = session.now_ms()

        def took() -> float:
            return round(session.now_ms() - started, 3)

        limit = self.spec.call_timeout
        seen = len(self._http_errors)
        try:
            result = await self._connection.call(name, args, limit, traceparent=self._traceparent(session))
        except (MCPError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError) or exc.code == REQUEST_TIMEOUT:
                return self._timed_out(session, name, args, started)
            if exc.code == CONNECTION_CLOSED:
                session.event("tool_result", tool=name, outcome=self._lost_outcome(), ms=took())
                raise self._lost(name, describe(exc)) from None
            # the HTTP answer the SDK words as "Server returned an error response": its status is what happened
            status = "; ".join(dict.fromkeys(self._http_errors[seen:])) or None
            if status is not None and status.startswith(("HTTP 401", "HTTP 403")):
                session.event("tool_result", tool=name, outcome="refused_by_server", http=status, ms=took())
                raise InfraError(f"{self._what}: the MCP server refused the call to {name}: {status}: check the "
                                 "target's headers (a token that expired?)") from None
            # A protocol error (an unknown tool, bad arguments...): the model sees it, as it would a failed call.
            self._counts["mcp_tool_errors"] += 1
            session.event("tool_result", tool=name, outcome="error", code=exc.code, ms=took(),
                          **({"http": status} if status else {}))
            said = f"{exc.message} ({status})" if status else exc.message
            return ToolCall(name=name, args=args, result={"error": said})
        except ConnectionLost as exc:
            session.event("tool_result", tool=name, outcome=self._lost_outcome(), ms=took())
            raise self._lost(name, str(exc)) from None
        except Exception as exc:  # an answer the SDK could not read, a transport that broke mid-call
            if self._too_large is not None:
                session.event("tool_result", tool=name, outcome="too_large", ms=took())
                raise self._lost(name, "") from None
            raise TurnError(f"calling {name} on the MCP server failed: {describe(cause(exc))}"
                            f"{self._stderr_tail()}") from None
        value, is_error = result_value(result)
        if is_error:
            self._counts["mcp_tool_errors"] += 1
        session.event("tool_result", tool=name, outcome="error" if is_error else "ok", ms=took(),
                      result=_for_the_timeline(result.model_dump(mode="json", exclude_none=True, exclude={"meta"})))
        return ToolCall(name=name, args=args, result=value)

    def _traceparent(self, session: Session) -> str | None:
        """The turn's `traceparent` for a call's `_meta`, or the suite's own `traceparent` header (it wins)."""
        own = next((value for name, value in self.spec.headers.items() if name.lower() == "traceparent"), None)
        if own is not None:
            return session.context.render_text(own)
        return session.trace.traceparent if session.trace is not None else None

    def _timed_out(self, session: Session, name: str, args: dict[str, Any], started: float) -> ToolCall:
        # a call slower than call_timeout is an error the model was given, as the docs' `mcp_tool_errors: 0` reads
        self._counts["mcp_tool_timeouts"] += 1
        self._counts["mcp_tool_errors"] += 1
        session.event("tool_result", tool=name, outcome="timeout", ms=round(session.now_ms() - started, 3))
        strays = self._noise.stray_note() if self._noise is not None else ""
        return ToolCall(name=name, args=args,
                        result={"error": f"the tool did not answer within {self.spec.call_timeout:g}s{strays}"})

    def _lost_outcome(self) -> str:
        return "too_large" if self._too_large is not None else "lost"

    def _lost(self, name: str, detail: str) -> TurnError:
        if self._too_large is not None:
            # the SDK ends the session when its transport refuses an answer: that, not a crash, is why
            return TurnError(f"the answer of {name} was refused: {self._too_large} (raise the target's "
                             "max_response_bytes to read it)")
        return TurnError(f"the MCP server went away when {name} was called (did it crash?): {detail}"
                         f"{self._stderr_tail()}")


class _Unreached(Exception):
    """An attempt to reach a server at its url that never got there; the next attempt may."""


_TIMELINE_RESULT_CHARS = 4096
"""The most of a server's result a `tool_result` event holds: the whole of it is the call's (`tool_calls`), and a
3 MB result was written three times into result.json (the event, the run's calls, the turn's calls)."""


def _for_the_timeline(dumped: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(dumped, ensure_ascii=False)
    if len(text) <= _TIMELINE_RESULT_CHARS:
        return dumped
    # cut at a word with `…`: a cut bare keeps a secret's head, which the redactor masks only before `…`
    start = one_line(text[:2000], 1000)  # bounded first: one_line reads the whole of what it is given
    return {"cut": f"{len(text):,} characters; the whole result is the tool call's", "start": start}
