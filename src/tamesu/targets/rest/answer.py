"""How the rest target turns what the agent sent (one answer, a stream's events, poll answers, posts) into the
turn: its text, tool calls, `ended`, handoff, and the faults a turn fails on (a 5xx, a reply path that found
nothing in JSON)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tamesu.conversation import AgentTurn, Session, ToolCall, TurnError
from tamesu.errors import InfraError, TemplateError
from tamesu.matching import quoted
from tamesu.net.urls import REFUSAL_HINTS, shown_url
from tamesu.targets._web_page import is_web_page, page_title
from tamesu.targets.rest.http import EXCERPT, Answer, excerpt
from tamesu.targets.rest.read import (
    COMMON_TEXT_PATHS,
    DEFAULT_DELTA,
    OLLAMA_DELTA,
    OLLAMA_GENERATE_DELTA,
    OPENAI_DELTA,
    StreamText,
    describe_keys,
    handoff,
    holds,
    keys_of,
    text_of,
    texts,
    tool_calls,
    values,
)
from tamesu.targets.rest.spec import RestSpec
from tamesu.targets.rest.stream_errors import malformed_event
from tamesu.targets.rest.stream_tools import StreamedToolCalls
from tamesu.targets.rest.ui_stream import UiMessageStream, read_data_stream


class TurnReader:
    """One per target instance: it remembers which common reply field it fell back to, so that is said once."""

    def __init__(self, spec: RestSpec, session: Callable[[], Session]) -> None:
        self.spec = spec
        self._session = session
        self._detected_text = ""
        self._data_stream_said = False

    def answer_turn(self, answer: Answer) -> AgentTurn:
        self.fail_on_refusal(answer)  # first: a 501 with no JSON is the server's refusal, not the agent failing
        self.fail_on_5xx(answer)
        self.fail_on_web_page(answer)
        if answer.data_stream and isinstance(answer.body, str) and answer.status < 400:
            read = read_data_stream(answer.body)
            if not self._data_stream_said:
                self._data_stream_said = True
                self._session().event("data_stream", note="the agent answered the AI SDK 4 data stream: its text "
                                      "parts are the reply, its tool call and result parts the tool calls")
            raw: list[object] = [{"parts": read.parts}]
            return self.turn(text=read.text, raw=raw, scan=raw, status=answer.status, sent_at_ms=answer.sent_at_ms,
                             completed_at_ms=answer.completed_at_ms, calls=read.tool_calls)
        turn = self.turn(text=self._reply_text(answer.body), raw=[answer.body], scan=[answer.body],
                         status=answer.status, sent_at_ms=answer.sent_at_ms, completed_at_ms=answer.completed_at_ms)
        if not turn.text and not turn.ended and answer.status < 400 \
                and isinstance(answer.body, dict | list) and not values(self.spec.response.text, answer.body):
            # "the agent said nothing" would hide that tamesu looked in the wrong place
            message = (f"response.text ({self.spec.response.text}) found nothing in the JSON answer; "
                       f"{describe_keys(answer.body)}")
            written = "text" in self.spec.response.model_fields_set
            if written and not turn.tool_calls:
                raise TurnError(f"{message}: set response.text to the field with the reply", raw=answer.body,
                                status=answer.status)
            # not set (a helper agent answering with data, `tamesu test -n URL`): said, not failed; nor is a turn
            # of tool calls alone, which may leave the reply's key out, but a path the user wrote that no answer
            # holds ($.replyy) is said, where `contains` would only say the agent said nothing
            if written or not turn.tool_calls:
                self._session().event("text_not_found", path=self.spec.response.text, note=message)
        return turn

    def _reply_text(self, body: object) -> str:
        """The reply at `response.text`; when it was left at its default and finds nothing, the first common
        reply field that holds text (`tamesu test -n URL` cannot set the path), said once as an event."""
        path = self.spec.response.text
        if not isinstance(body, dict | list):
            return text_of(path, body)
        found = values(path, body)
        if found or "text" in self.spec.response.model_fields_set:
            return texts(found)
        for candidate in COMMON_TEXT_PATHS:
            # text only: `$.message` holding `{role, content}` (Ollama's answer) is not the reply, its content is
            text = "\n".join(v for v in values(candidate, body) if isinstance(v, str) and v)
            if text:
                if self._detected_text != candidate:
                    self._detected_text = candidate
                    self._session().event("text_detected", path=candidate,
                                          note=f"response.text is not set and {path} found nothing: "
                                               f"the reply was read from {candidate}")
                return text
        return ""

    def stream_turn(self, stream: StreamText, status: int | None, sent_at: float, completed_at: float) -> AgentTurn:
        events = stream.events
        if (broken := malformed_event(events)) is not None:
            broken.status = status
            raise broken
        if stream.detected is not None and self._detected_text != stream.detected:
            self._detected_text = stream.detected
            self._session().event("text_detected", path=stream.detected,
                                  note=f"response.delta is not set and the stream's events have no $.delta: its "
                                       f"text was read at {stream.detected} ({STACKS[stream.detected]})")
        calls = stream.tool_calls if isinstance(stream, UiMessageStream) else None
        if calls is None and "tool_calls" not in self.spec.response.model_fields_set:
            told = StreamedToolCalls()
            for event in events:
                told.add(event)
            calls = told.calls or None
        turn = self.turn(text=stream.text, raw=events, scan=events, status=status, sent_at_ms=sent_at,
                         first_token_at_ms=stream.first_token_at_ms, completed_at_ms=completed_at, calls=calls)
        reply = self.spec.response
        # a UI stream's text is its text-delta's; a stream of nothing but its closing event said nothing, as an
        # agent may (only pieces in none of which the reply was found were read in the wrong place)
        if not stream.found and not isinstance(stream, UiMessageStream) \
                and not all(holds(reply.final, event) for event in events):
            key, path = ("response.delta", reply.delta) if reply.delta is not None else \
                ("response.text", reply.text) if "text" in reply.model_fields_set else ("response.delta", DEFAULT_DELTA)
            counted = f"the stream's {len(events)} event{'s' if len(events) != 1 else ''}"
            self.said_nowhere(turn, events, key=key, path=path, where=counted,
                              set_here=bool({"delta", "text"} & reply.model_fields_set),
                              hint="set response.delta to the field with each piece of the reply",
                              unset=f"response.delta is not set and found nothing in {counted} (at $.delta, "
                                    f"{reply.text}, nor where OpenAI's, Anthropic's or Ollama's streams put text)")
        return turn

    def said_nowhere(self, turn: AgentTurn, docs: Sequence[object], *, key: str, path: str, where: str,
                     set_here: bool, hint: str, unset: str = "") -> None:
        """A turn of JSON whose reply path found nothing (a stream's events, posts, a poll's answer) was read in the
        wrong place, not an agent that said nothing: a path the suite set fails the turn naming what was there; the
        default is said as a `text_not_found` event, as a JSON answer's is (`answer_turn`)."""
        if turn.text or turn.tool_calls or turn.ended or not any(isinstance(doc, dict | list) for doc in docs):
            return
        message = f"{unset or f'{key} ({path}) found nothing in {where}'}; {keys_of(docs)}"
        if set_here:
            raise TurnError(f"{key} ({path}) found nothing in {where}; {keys_of(docs)}: {hint}", raw=list(docs),
                            status=turn.status, events=True)
        self._session().event("text_not_found", path=path, note=message)

    def turn(self, *, text: str, raw: Sequence[object], scan: Sequence[object], status: int | None, sent_at_ms: float,
             completed_at_ms: float, first_token_at_ms: float | None = None,
             calls: list[ToolCall] | None = None) -> AgentTurn:
        """`calls`: the tool calls when the stream's own protocol named them, else read at `response.tool_calls`."""
        reply = self.spec.response
        handed = handoff(self.spec.handoff, text, scan)
        if handed is not None:
            self._session().event("handoff", to=handed.to, summary=handed.summary)
        return AgentTurn(
            text=text, response=raw[-1] if raw else None, raw=raw, status=status,
            tool_calls=self._tool_calls(scan) if calls is None else calls, sent_at_ms=sent_at_ms,
            first_token_at_ms=first_token_at_ms, completed_at_ms=completed_at_ms,
            ended=handed is not None or (reply.done is not None and any(holds(reply.done, doc) for doc in scan)),
            handoff=handed)

    def _tool_calls(self, scan: Sequence[object]) -> list[ToolCall]:
        """At `response.tool_calls`; left unset and finding nothing, where OpenAI-, Anthropic- or Ollama-shaped
        answers have them."""
        if "tool_calls" in self.spec.response.model_fields_set:
            return tool_calls(self.spec.response.tool_calls, scan)
        for doc in scan:
            # an answer holding none of the keys the four paths start with holds no tool calls: nearly every
            # answer, which the four paths took some twelve calls a turn to find empty
            if not isinstance(doc, dict) or not _DEFAULT_TOOL_KEYS.isdisjoint(doc):
                break
        else:
            return []
        return tool_calls(self.spec.response.tool_calls, scan) or tool_calls(OPENAI_TOOL_CALLS, scan) or \
            tool_calls(ANTHROPIC_TOOL_CALLS, scan) or tool_calls(OLLAMA_TOOL_CALLS, scan)

    def fail_on_web_page(self, answer: Answer) -> None:
        """A whole HTML document is a web page, not an agent's reply: a url that names the site rather than its
        API, a sign-in page, a proxy's or captive portal's notice. No agent answered: where tamesu was sent is
        wrong, an infrastructure error (exit 3) as a 404 is (as the a2a and mcp targets say a server that is no
        endpoint of theirs), never the agent's failed turn nor its words."""
        body = answer.body
        if answer.status >= 400 or not isinstance(body, str) or not is_web_page(body):
            return
        title = page_title(body)
        named = f", titled '{title}'" if title else ""
        raise InfraError(self._session().redactor.text(
            f"{self._url()} answered HTTP {answer.status} with a web page{named}, not an agent's reply: is url the "
            "agent's API (a page behind a sign-in or proxy, or the site itself, answers HTML; a chat on a web page is "
            "the browser target's)?"))

    def _url(self) -> str:
        """The target's url as the request went to it (rendered), not yet masked, without a `user:password@` or
        its query (`net.urls.shown_url`)."""
        try:
            return shown_url(self._session().context.render_url(self.spec.url))
        except TemplateError:  # it was rendered to send the request: not met
            return shown_url(self.spec.url)

    def fail_on_refusal(self, answer: Answer) -> None:
        """A 401, 403, 404, 405 or 501 with no JSON is the server refusing the request, not an agent's answer: a
        url that names no endpoint (another server on that port: `tamesu view`, a proxy, a static file server), a
        missing or wrong token. Read as the reply ("Not Found"), a test with few checks passed, and a 501 failed
        as the agent's turn; it is where tamesu was sent that is wrong. One with JSON stays a turn with its status
        (an agent's own `{"error": ...}`, which a test may expect)."""
        if answer.status not in REFUSAL_HINTS or isinstance(answer.body, dict | list):
            return
        raise InfraError(self._session().redactor.text(
            f"the agent's server refused the request at {self._url()}: HTTP {answer.status} "
            f"({_refusal_said(answer.body)}): {REFUSAL_HINTS[answer.status]}"))

    def fail_on_poll_answer(self, answer: Answer, url: str) -> None:
        """A poll answered 5xx fails the turn. One answered 401, 403 or 405, or a 501 with no JSON, is never "not
        yet" (a 404 is: a job not made yet is often not found): the url, method or credentials are wrong, and
        polling on until the timeout would only hide it."""
        if answer.status not in (401, 403, 405, 501) or (answer.status == 501 and isinstance(answer.body, dict | list)):
            self.fail_on_5xx(answer)
            return
        said = self._session().redactor.text(_refusal_said(answer.body))
        raise InfraError(f"the poll URL {url} refused the request: HTTP {answer.status} ({said}): "
                         f"{REFUSAL_HINTS[answer.status]}")

    def fail_on_5xx(self, answer: Answer) -> None:
        """A 5xx fails the turn in one line: a gateway's or proxy's HTML error page by its title (its markup said
        nothing more), any other body by its words with their line breaks folded (an agent's traceback)."""
        if answer.status < 500:
            return
        body = answer.body
        if isinstance(body, str) and is_web_page(body):
            title = page_title(body)
            said = f" with a web page, titled '{self._session().redactor.text(title)}'" if title else " with a web page"
        else:
            said = f": {self._session().redactor.text(excerpt(body))}"
        raise TurnError(f"the agent answered HTTP {answer.status}{said}", raw=body, status=answer.status)


def _refusal_said(body: object) -> str:
    """What a refusal's body said, short: a server's HTML error page by its title (its markup is no words)."""
    title = page_title(body) if isinstance(body, str) and is_web_page(body) else None
    return f"a web page, titled '{title}'" if title else excerpt(body) or "no body"


def timed_out(limit: float, waiting_for: str, stream: StreamText | None) -> TurnError:
    """The turn over `turn_timeout`, with what a stream had brought by then: a stream that stalls part-way is
    told from one that never began, and the failed turn keeps its events."""
    came = "" if stream is None or not stream.events else (
        f"; {len(stream.events)} event{'s' if len(stream.events) != 1 else ''} came before, "
        + (f"its text: {quoted(stream.text, EXCERPT)}" if stream.text else "no text"))
    detail = f" ({waiting_for}{came})" if waiting_for else ""
    return TurnError(f"turn timed out after {limit:g}s{detail}", raw=list(stream.events) if came and stream else None,
                     limit_s=limit, events=True)


STACKS = {OPENAI_DELTA: "OpenAI-style chunks", OLLAMA_DELTA: "Ollama's chat chunks",
          OLLAMA_GENERATE_DELTA: "Ollama's generate chunks"}
"""Whose stream a detected text path is."""
OPENAI_TOOL_CALLS = "$.choices[0].message.tool_calls"
"""Where an agent served as OpenAI's chat API puts its tool calls (`{id, type, function: {name, arguments}}`)."""
ANTHROPIC_TOOL_CALLS = "$.content[?(@.type == 'tool_use')]"
"""Where an agent served as Anthropic's Messages API puts them (`{type: tool_use, id, name, input}` blocks)."""
OLLAMA_TOOL_CALLS = "$.message.tool_calls"
"""Where Ollama's native `/api/chat` answer puts them (`{function: {name, arguments}}`, the arguments an object)."""
_DEFAULT_TOOL_KEYS = frozenset({"tool_calls", "choices", "content", "message"})
"""The first key of each path read for tool calls when `response.tool_calls` is not set (its default `$.tool_calls`,
then OpenAI's, Anthropic's and Ollama's)."""
