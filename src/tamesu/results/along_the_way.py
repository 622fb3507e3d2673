"""What happened in a run that changed no verdict but a person should know: requests sent again, answers cut or
repaired, values looked for and not found, parameters a model server refused. Each is an event in its test's
`result.json`; the console ends the run with one line counting them, so a green run does not hide them, and a
`load:` profile's report says those of its stage runs (`engine.load`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from tamesu.conversation import Event
from tamesu.results.records import RunResult

NOTABLE: dict[str, tuple[str, str, str]] = {
    "rate_limited": ("request", "requests", "refused with HTTP 429 and sent again"),
    "resent": ("request", "requests", "sent again after the connection dropped"),
    "model_retry": ("model call", "model calls", "retried"),
    "model_timeout": ("model call", "model calls", "timed out"),
    "model_fallback": ("model call", "model calls", "answered by the fallback model"),
    "model_usage_missing": ("model answer", "model answers", "came without token usage (counted as 0 tokens, $0)"),
    "model_adapted": ("model parameter", "model parameters", "dropped for a server that refused it"),
    "model_answer_cut": ("model answer", "model answers", "cut short (max_tokens or the context window)"),
    "model_answer_withheld": ("model answer", "model answers",
                              "withheld by the server (content filter or refusal)"),
    "verdict_repaired": ("judge answer", "judge answers", "repaired"),
    "verdict_reasked": ("judge answer", "judge answers", "asked again"),
    "simulator_repaired": ("simulated user answer", "simulated user answers", "repaired"),
    "simulator_reasked": ("simulated user answer", "simulated user answers", "asked again"),
    "response_truncated": ("answer", "answers", "cut at max_response_bytes"),
    "text_not_found": ("answer", "answers", "where the reply's path found nothing (response.text, delta, or "
                       "a listen or poll text)"),
    "text_detected": ("reply field", "reply fields", "guessed (response.text or response.delta not set)"),
    "sse_detected": ("answer", "answers", "read as an event stream by its content type (streaming not set)"),
    "ui_message_stream": ("answer", "answers", "read as an AI SDK UI message stream"),
    "data_stream": ("answer", "answers", "read as an AI SDK data stream"),
    "mcp_stdout_noise": ("MCP server", "MCP servers", "printed lines that are not JSON-RPC on stdout (the stdio "
                         "protocol's channel; in mcp-server.log)"),
    "trace_not_found": ("trace", "traces", "looked for and not found"),
    "trace_incomplete": ("trace", "traces", "came without the agent's span under tamesu's (the rest may be late)"),
    "trace_shared": ("trace", "traces", "sent by another run at the same time too (its spans of both)"),
    "capture_not_found": ("capture", "captures", "found in no agent turn"),
    "agent_spoke_before_reply": ("stretch of agent speech", "stretches of agent speech",
                                 "came before the user's words it would answer had ended"),
    "agent_hung_up_mid_speech": ("call", "calls", "closed by the agent while its audio was still speech"),
    "barge_in_late": ("barge-in", "barge-ins", "started later than the persona's behaviour drew (its words were "
                      "not ready)"),
    "transcription_cut": ("agent utterance", "agent utterances", "heard but not transcribed in time (a wait_for's, "
                          "or turn_timeout after they were heard out)"),
    "transcription_bounded": ("agent utterance", "agent utterances", "transcribed only up to Whisper's token bound "
                              "(it looped on a phrase: the words after it are missing)"),
    "audio_slow_pace": ("agent reply", "agent replies", "streamed at a usual sample rate's fraction of real time"),
    "chat_unread": ("chat turn", "chat turns", "followed by widget messages no turn read (a greeting the widget "
                    "writes late reads each answer a turn late: chat.greeting)"),
    # a `chat_unread` with `after_turn: 0` follows no turn: the widget wrote it before the first words were sent
    "chat_unread after_turn 0": ("widget greeting", "widget greetings", "written before the first turn, read by no "
                                 "turn (chat.greeting: true reads it as turn 1)"),
}
"""Event name (or a kind of one: `_kind`) -> the noun counted (one, several) and what happened to it. Not
`connect_retry`: `connect.attempts` is there for agents still starting (a hook's `agent &`, a container coming up),
and running out of them is the run's error line."""
_RUN_AGAIN = "retries"
NOTABLE[_RUN_AGAIN] = ("test run", "test runs", "made again after an error")
"""A test's own `retries`: each run made again is counted, as the events are."""


def _kind(event: Event) -> str:
    """The `NOTABLE` key an event counts under: its name, and for widget messages read by no turn, whether they
    came before the first turn (a greeting) or after one."""
    if event.name == "chat_unread" and event.data.get("after_turn") == 0:
        return "chat_unread after_turn 0"
    return event.name


class AlongTheWay:
    """Counts the notable events of the runs it is given, and the tests they happened in."""

    def __init__(self) -> None:
        self._events: Counter[str] = Counter()
        self._tests: dict[str, set[str]] = {}

    def add(self, runs: Iterable[RunResult]) -> None:
        # an errored run's events count too: its error line says why it ended, not the retries on the way (a
        # summary of 2 retried calls in 1 test was 7 in 3)
        for run in runs:
            test = f"{run.suite}/{run.test}"
            if run.attempt > 1:  # the test's own `retries`: the last attempt, made again `attempt - 1` times
                self._events[_RUN_AGAIN] += run.attempt - 1
                self._tests.setdefault(_RUN_AGAIN, set()).add(test)
            for event in run.events:
                kind = _kind(event)
                if kind in NOTABLE:
                    self._events[kind] += 1
                    self._tests.setdefault(kind, set()).add(test)

    def line(self) -> str:
        """`along the way: 8 requests refused with HTTP 429 and sent again (rate_limited, 3 tests); ...`, or ""."""
        said = []
        for name in NOTABLE:
            number = self._events[name]
            if number:
                one, several, what = NOTABLE[name]
                tests = len(self._tests[name])
                said.append(f"{number} {one if number == 1 else several} {what} ({name}, "
                            f"{tests} test{'' if tests == 1 else 's'})")
        return "along the way: " + "; ".join(said) if said else ""
