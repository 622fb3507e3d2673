"""The `model` target: a system prompt and declared tools run directly against a model, no agent server.

The model is `model` (a name under `models:`, a shorthand such as `openai:gpt-4o-mini`, or a mapping);
without it, the run's `models.target`. The system prompt is `system`, or `system_file` (a path relative to
the suite); either is a template rendered once when the session opens (`{{vars.x}}`, `{{secrets.X}}`...).

One user turn is one agent turn. The user's words (a script step's data as JSON, files as [name], as the
transcript shows them) become a user message; the model is asked with the whole conversation so far (system,
user, assistant and tool messages), `temperature`, `max_tokens` and the declared tools. When it asks for
tools, tamesu answers every call from the tool's declaration and asks again, at most `max_tool_rounds`
times; a model still asking for tools after that fails the turn (TurnError). The turn's text is every text
the model wrote during the turn, joined by newlines (a "let me check" before a tool call is said to the
user too); `raw` is every ModelResponse of the turn as JSON, `response` the last one.

How a tool call is answered, from its declaration:
- `results`: `[{when: {arg: value}, result | error}]`, the first entry whose `when` matches the call's
  arguments wins. `when` matches like `tool_called`'s `args`: every key given must be there, a value equal
  to the argument matches, a string that is not equal is tried as a full regular expression.
- otherwise `error: "message"` makes the tool fail (the model gets `{"error": "message"}`), or `result`
  (any JSON) is its answer. A tool with none of them answers null; a tool whose `results` all miss, with
  no `result` or `error` to fall back on, fails with "no result declared for these arguments".
- results and errors are templates rendered with the call's arguments as `{{args.x}}` (and everything
  else the test knows: `{{captured.x}}`, `{{vars.x}}`). A template naming an argument the model did not
  pass fails the turn, so a typo in the suite does not pass for the model's fault silently.
- a tool the model invented is answered `{"error": "no tool named X"}`.
- a call whose arguments are no JSON object (broken JSON) reaches no tool: the model is answered the error,
  and the run records a `tool_arguments_invalid` event (`tool`, `arguments` as written, `error`) and metric.
- a declared tool the test names in `fuzz_tools` misbehaves as the mode says (`tamesu.fuzzing`): `error`,
  `empty`, `hostile`, `custom` replace its answer; `delay` holds the declared answer back.
Every call is recorded as a ToolCall (name, args, result) for `tool_called` and `tool_sequence`.

Failures: a ModelError (no key, unreachable, rate-limited after the client's retries) is not the agent's
fault: it raises InfraError, after trying `fallback` (another model) when one is declared. A turn longer
than `turn_timeout` raises TurnError. A failed turn leaves the conversation history as it was before it; the
tool calls it made before it failed go with its TurnError, and the transcript keeps them.

Traces: every model request of a turn (each tool round, a fallback's) carries the turn's W3C `traceparent` header,
unless the model's own `headers` set one (it wins); the judge's and the simulator's requests carry none.

`handoff` works as for rest, over the turn's ModelResponses: `json_path: "$.tool_calls[?(@.name ==
'transfer_to_human')]"` makes a tool call the handoff signal. Each request carries `purpose: target`, no seed,
and `context: {message}` (the user's turn) for the fake provider's rules, plus `run` (its number) from a repeated
test's second run on, so the replay cache keys every run apart.

Events: `transport` (the model, its fallbacks as tried, tools), `model_fallback`, `handoff`, `tool_arguments_invalid`,
`model_answer_cut` / `model_answer_withheld` (an answer cut at the token limit, or withheld by the server). Metrics:
`model_calls`, the calls made (a fallback's included); `tool_arguments_invalid`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from tamesu.conversation import AgentTurn, FileRef, Session, ToolCall, TurnError, UserTurn
from tamesu.errors import InfraError, TemplateError
from tamesu.fuzzing import fuzz_for, fuzzed_call
from tamesu.matching import args_problem, one_line
from tamesu.models import attachments
from tamesu.models.base import (
    Message,
    MessageFile,
    ModelClient,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolRequest,
    ToolSpec,
)
from tamesu.models.spec import ModelSpec
from tamesu.net.bounded import bounded_reading, is_too_large
from tamesu.plugins import register
from tamesu.suite.templates import Context
from tamesu.targets._model_fallbacks import fallbacks_said
from tamesu.targets._model_spec import ModelTargetSpec, ModelToolSpec, ToolResultCase
from tamesu.targets._model_stops import say_why_it_stopped
from tamesu.targets._tool_arguments import unreadable_call
from tamesu.targets._turn_clock import turn_deadline
from tamesu.targets.base import Target
from tamesu.targets.rest.read import handoff

__all__ = ["ModelTarget", "ModelTargetSpec", "ModelToolSpec", "ToolResultCase"]

_NO_MATCH = "no result declared for these arguments"


def _label(model: str | ModelSpec | None, role: str = "target") -> str:
    """How a model is named in messages: as written, or `models.target`."""
    if model is None:
        return f"models.{role}"
    if isinstance(model, str):
        return model
    return f"{model.provider}:{model.model}" if model.model else model.provider


def _one_line(exc: Exception) -> str:
    """A provider's message (which may quote a server's body) as one line of an error."""
    return one_line(str(exc)) or type(exc).__name__


@register("targets", "model")
class ModelTarget(Target[ModelTargetSpec]):
    kind = "model"
    reads_handoff = True
    metric_names = frozenset({"model_calls", "tool_arguments_invalid"})
    Spec = ModelTargetSpec
    carries_history = True
    takes_options = frozenset({"connector"})  # the model that answers (`plan.targets.with_connector`)
    model_is_the_agent: ClassVar[bool] = True
    """Each model request of a turn carries the turn's `traceparent` (the mcp target's model is no agent)."""

    def __init__(self, spec: ModelTargetSpec, name: str) -> None:
        super().__init__(spec, name)
        self.spec: ModelTargetSpec = spec
        self._clients: list[tuple[str, ModelClient]] = []
        """The model, then its fallback: (label, client)."""
        self._turn_clients: list[tuple[str, ModelClient]] = []
        """The turn's own model, when its options name another (`connector`); else the target's."""
        self._messages: list[Message] = []
        self._reached_model = False
        """A request of this turn reached the model (not the replay cache, not the fake provider)."""
        self._tools = {tool.name: tool for tool in spec.tools}
        self._calls = 0
        self._turn_calls: list[ToolCall] = []
        """The tool calls of the turn being sent, kept for a turn that fails half-way (TurnError.tool_calls)."""

    @classmethod
    def file_refusal(cls, spec: object, file: FileRef, models: Mapping[str, object]) -> str | None:
        """As the provider of the target's model (`models.target` when it names none) takes files."""
        if not isinstance(spec, ModelTargetSpec):
            raise TypeError(f"a model target's spec, not {type(spec).__name__}")
        model = spec.model if spec.model is not None else models.get("target")
        if isinstance(model, str):
            model = models.get(model) or model
        try:
            provider = ModelSpec.model_validate(model).provider if model is not None else None
        except ValueError:
            return None  # the model itself is wrong: the run says so, in its own words
        if provider is None:
            return None
        reason = attachments.refusal(provider, file.mime, by_url=file.path is None)
        return f"{file.name}: {reason}" if reason else None

    # -- open and close -------------------------------------------------------------------------------

    async def _open(self, session: Session) -> None:
        self._clients = [(_label(self.spec.model), self._client(session, self.spec.model))]
        if self.spec.fallback is not None:
            self._clients.append((_label(self.spec.fallback), self._client(session, self.spec.fallback)))
        system = self._system(session)
        self._messages = [Message(role="system", content=system)] if system else []
        session.event("transport", model=self._clients[0][0], **fallbacks_said(self._clients),
                      tools=[tool.name for tool in self._offered_tools()], system_chars=len(system))

    def _client(self, session: Session, model: str | ModelSpec | None) -> ModelClient:
        if session.models is None:
            raise InfraError(f"{self._what}: the model target needs models: no models are configured for this "
                             "run; configure models.target or the target's model")
        try:
            return session.models.client("target", model)
        except ModelError as exc:
            # The registry's message names what is missing: models.target, or the unknown name.
            raise InfraError(f"{self._what}: {_one_line(exc)}") from exc

    def _system(self, session: Session) -> str:
        spec = self.spec
        if spec.system_file is not None:
            path = session.base_dir / spec.system_file
            try:
                template = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise InfraError(f"{self._what}: cannot read system_file {spec.system_file} "
                                 f"({exc.strerror or exc})") from exc
            where = f"system_file {spec.system_file}"
        elif spec.system is not None:
            template, where = spec.system, "system"
        else:
            return ""
        try:
            return session.context.render_text(template)
        except TemplateError as exc:
            raise InfraError(f"{self._what}: {where}: {exc}") from exc

    async def close(self) -> None:
        self._clients = []  # the clients belong to the run's model registry, which releases them

    def metrics(self) -> dict[str, float]:
        return {"model_calls": float(self._calls)}

    # -- turns ----------------------------------------------------------------------------------------

    async def send(self, turn: UserTurn) -> AgentTurn:
        session = self._require_session()
        chosen = turn.options.get("connector")  # a JSONL turn's own options.connector answers that turn
        self._turn_clients = [(chosen, self._client(session, chosen))] \
            if isinstance(chosen, str) and chosen != _label(self.spec.model) else []
        kept = len(self._messages)
        limit = self.spec.turn_timeout
        try:
            # a stateless test gives the conversation so far with the turn: it goes before the user's words
            # (a user message's files as content parts; an assistant's, which no provider takes, as [name])
            for earlier, message in zip(turn.history, turn.messages()[:-1], strict=True):
                self._messages.append(
                    Message(role="user", content=earlier.content, files=self._files(earlier.files))
                    if earlier.role == "user" else Message(role=message["role"], content=message["content"]))
            # files travel as the provider's content parts; the words stay as the transcript shows them,
            # less the [name] lines that stand for the files there
            words = turn.display() if not turn.files else turn.model_copy(update={"files": []}).display()
            self._messages.append(Message(role="user", content=words, files=self._files(turn.files)))
        except BaseException:
            del self._messages[kept:]
            raise
        try:
            async with turn_deadline(session, limit) as clock:
                return await self._exchange(session, turn.display())
        except TimeoutError:
            del self._messages[kept:]
            if not clock.scope.expired():
                raise
            if clock.cut:  # the client was sleeping on the server's Retry-After: a model fault, as its 429 is
                raise InfraError(f"{self._what}: turn_timeout ({limit:g}s) ran out during {' and '.join(clock.cut)}, "
                                 "not while the model answered") from None
            timed_out = TurnError(f"turn timed out after {limit:g}s", limit_s=limit)
            timed_out.tool_calls = list(self._turn_calls)
            raise timed_out from None
        except TurnError as exc:
            del self._messages[kept:]
            exc.tool_calls = exc.tool_calls or list(self._turn_calls)  # the calls made before it failed
            raise
        except BaseException:
            # The engine ends the conversation on a failed turn, but a half-answered tool round must never
            # be sent to a model again (providers reject a tool call without its result).
            del self._messages[kept:]
            raise

    def _files(self, files: list[FileRef]) -> list[MessageFile]:
        """The turn's files as the model gets them: the bytes of a local file, or the URL of a remote one."""
        carried: list[MessageFile] = []
        for file in files:
            if file.path is None:
                carried.append(MessageFile(name=file.name, mime=file.mime, url=file.uri))
                continue
            try:
                data = Path(file.path).read_bytes()
            except OSError as exc:
                raise InfraError(f"{self._what}: cannot read attachment {file.name}: {exc.strerror or exc}") from exc
            carried.append(MessageFile(name=file.name, mime=file.mime, data=base64.b64encode(data).decode()))
        return carried

    async def _exchange(self, session: Session, said: str) -> AgentTurn:
        self._reached_model = False
        responses: list[ModelResponse] = []
        calls: list[ToolCall] = []
        self._turn_calls = calls
        sent_at = session.now_ms()
        for round_ in range(self.spec.max_tool_rounds + 1):
            response = await self._generate(said)
            responses.append(response)
            say_why_it_stopped(session, response, self.spec.max_tokens)
            self._messages.append(Message(role="assistant", content=response.text, tool_calls=response.tool_calls))
            if not response.tool_calls:
                break
            if round_ == self.spec.max_tool_rounds:
                asked = ", ".join(call.name for call in response.tool_calls)
                raise TurnError(f"the model still asked for tools ({asked}) after {round_} round(s) of tool "
                                f"results (max_tool_rounds: {self.spec.max_tool_rounds})",
                                raw=[r.model_dump(mode="json") for r in responses])
            for request in response.tool_calls:
                call = self._unreadable(session, request, request.unreadable) if request.unreadable is not None \
                    else await self._call_tool(session, request, responses)
                calls.append(call)
                self._messages.append(Message.tool_result(call.result, request.id, request.name))
        completed_at = session.now_ms()
        raw = [r.model_dump(mode="json") for r in responses]
        text = "\n".join(r.text for r in responses if r.text)
        handed = handoff(self.spec.handoff, text, raw)
        if handed is not None:
            session.event("handoff", to=handed.to, summary=handed.summary)
        return AgentTurn(text=text, response=raw[-1], raw=raw, tool_calls=calls, sent_at_ms=sent_at,
                         first_token_at_ms=None, completed_at_ms=completed_at, handoff=handed)

    def _request(self, said: str) -> ModelRequest:
        # What the fake provider's rules read, and which run of a repeated test asks. Nothing else goes here: the
        # context is part of the replay cache key, and the messages already say everything else (renaming the
        # target keeps the cache).
        context: dict[str, object] = {"message": said}
        if (number := self._run_number()) > 1:
            # each run is another try of the agent: with run 1's key, runs 2..N replayed run 1's answer and
            # pass^k was one answer counted N times; run 1 keeps the key it always had
            context["run"] = number
        return ModelRequest(
            purpose="target", messages=list(self._messages), temperature=self.spec.temperature,
            max_tokens=self.spec.max_tokens, seed=None, tools=self._offered_tools(), context=context,
            headers=self._trace_headers(),
        )

    def _run_number(self) -> int:
        """Which run of its test this session is (`{{run.number}}`); 1 when the session says none."""
        try:
            number = self._require_session().context.lookup("run.number")
        except TemplateError:
            return 1
        return number if isinstance(number, int) else 1

    def turn_trace_id(self, session: Session) -> str | None:
        if self.model_is_the_agent and not self._reached_model:
            return None  # every answer of the turn came from the replay cache or the fake provider
        return super().turn_trace_id(session)

    def _trace_headers(self) -> dict[str, str]:
        """The turn's `traceparent` for each model request of the turn: the model is the agent here. (The
        mcp target's model only drives the server under test: its requests carry none.)"""
        trace = self._require_session().trace
        return {"traceparent": trace.traceparent} if trace is not None and self.model_is_the_agent else {}

    async def _generate(self, said: str) -> ModelResponse:
        """Ask the model, then its fallback; what neither can answer is not the agent's fault."""
        request = self._request(said)
        failures: list[str] = []
        for position, (label, client) in enumerate(self._turn_clients or self._clients):
            if position:
                self._require_session().event("model_fallback", model=label, reason=failures[-1])
            self._calls += 1
            try:
                # the provider's client reads no answer past max_response_bytes (tamesu.net.bounded)
                with bounded_reading(self.spec.max_response_bytes, self._refused):
                    answered = await client.generate(request)
            except ModelError as exc:
                if is_too_large(exc):  # the agent's answer, refused for its size: a failed turn, not exit 3
                    raise TurnError(f"the model's answer was refused: {_one_line(exc)} (raise the target's "
                                    "max_response_bytes to read it)") from None
                said = _one_line(exc)  # the provider's error names its model already: not "m: m: HTTP 500"
                failures.append(said if said.startswith(f"{label}:") else f"{label}: {said}")
                continue
            # a replayed or fake answer was no request: the trace went nowhere
            self._reached_model = self._reached_model or not (answered.cached or answered.fake)
            return answered
        if len(failures) == 1:
            raise InfraError(f"{self._what}: the model call failed: {failures[0]}")
        raise InfraError(f"{self._what}: the model and its fallback failed: {'; '.join(failures)}")

    def _refused(self, note: str, read: int, declared: int | None) -> None:
        self._require_session().event("response_truncated", limit=self.spec.max_response_bytes,
                                      sizes={"body": read}, read=read, declared=declared, complete=False, note=note)

    # -- tools ----------------------------------------------------------------------------------------

    def _offered_tools(self) -> list[ToolSpec]:
        """The tools the model may call; the mcp target offers its server's instead."""
        return [tool.offered() for tool in self.spec.tools]

    def _recorded_name(self, name: str) -> str:
        """The name a call is recorded under: the tool's own (the mcp target's server may spell it otherwise)."""
        return name

    def _unreadable(self, session: Session, request: ToolRequest, why: str) -> ToolCall:
        """A call whose arguments were no JSON object (`_tool_arguments.unreadable_call`)."""
        return unreadable_call(session, self._recorded_name(request.name), request, why)

    async def _call_tool(self, session: Session, request: ToolRequest, responses: list[ModelResponse]) -> ToolCall:
        """One call answered: as the test's `fuzz_tools` says for this tool, else from its declaration. The mcp
        target overrides this to call its server."""
        fuzz = fuzz_for(session, request.name)
        if fuzz is not None and request.name in self._tools:
            async def declared() -> ToolCall:
                return self._answer(session, request, responses)

            return await fuzzed_call(session, fuzz, request.name, request.arguments, declared)
        return self._answer(session, request, responses)

    def _answer(self, session: Session, request: ToolRequest, responses: list[ModelResponse]) -> ToolCall:
        """The declared answer to one call, recorded as the ToolCall the assertions read."""
        tool = self._tools.get(request.name)
        if tool is None:
            return ToolCall(name=request.name, args=request.arguments,
                            result={"error": f"no tool named {request.name}"})
        context = session.context.child(args=request.arguments)
        result, error = self._declared(tool, request.arguments, context)
        try:
            if error is not None:
                return ToolCall(name=tool.name, args=request.arguments,
                                result={"error": context.render_text(error)})
            return ToolCall(name=tool.name, args=request.arguments, result=context.render_value(result))
        except TemplateError as exc:
            raise TurnError(f"tool {tool.name}: cannot write its result: {exc} (the model called it with "
                            f"{json.dumps(request.arguments, ensure_ascii=False, default=str)})",
                            raw=[r.model_dump(mode="json") for r in responses]) from None

    def _declared(self, tool: ModelToolSpec, args: Mapping[str, object], context: Context) -> tuple[object, str | None]:
        """(result, error) for these arguments: the first matching `results` entry, else the tool's own."""
        for case in tool.results:
            try:
                expected = context.render_value(case.when)
            except TemplateError:
                continue  # a `when` naming a value that does not exist yet cannot match
            if args_problem(expected, args) is None:
                return case.result, case.error
        if tool.error is not None:
            return None, tool.error
        if tool.results and "result" not in tool.model_fields_set:
            return None, _NO_MATCH
        return tool.result, None

    # -- state ----------------------------------------------------------------------------------------

