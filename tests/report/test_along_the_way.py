"""The console's `along the way:` line counts what happened in every run: an errored run's retries too (a run
whose judge gave up after its retries said "2 model calls retried (1 test)" of 7 in 3 tests), and a test's own
`retries` (a run made again after an error was said nowhere on the console)."""

from __future__ import annotations

from tamesu.conversation import Event
from tamesu.report.along_the_way import AlongTheWay
from tamesu.results.records import RunResult


def _run(test: str, status: str, retries: int, attempt: int = 1) -> RunResult:
    run = RunResult(suite="s", test=test, run=1, attempt=attempt, status=status, started_at="", target="bot",
                    target_type="rest")  # type: ignore[arg-type]  # a status of the Literal
    run.events = [Event(name="model_retry", at_ms=float(k), data={}) for k in range(retries)]
    return run


def test_every_runs_retries_are_counted_and_a_run_made_again_is_said() -> None:
    along = AlongTheWay()
    along.add([_run("passed", "passed", 2), _run("errored", "error", 3), _run("again", "passed", 0, attempt=2)])
    assert along.line() == ("along the way: 5 model calls retried (model_retry, 2 tests); 1 test run made again "
                            "after an error (retries, 1 test)")


def test_a_run_made_again_twice_is_counted_twice() -> None:
    # `retries: 2` on an agent that never answers: run-1, run-1-retry-1, run-1-retry-2, and the console said
    # "1 test run made again" (only the last attempt reaches the reporter)
    along = AlongTheWay()
    along.add([_run("dead", "error", 0, attempt=3)])
    assert along.line() == "along the way: 2 test runs made again after an error (retries, 1 test)"


def test_widget_messages_before_the_first_turn_are_said_as_a_greeting() -> None:
    # before: "2 chat turns followed by widget messages no turn read" of one message after turn 1 and a greeting
    # written before any turn (after_turn 0), which followed no turn
    greeted, late = _run("greeted", "passed", 0), _run("late", "passed", 0)
    greeted.events = [Event(name="chat_unread", at_ms=1.0, data={"after_turn": 0, "messages": ["Hi!"]})]
    late.events = [Event(name="chat_unread", at_ms=9.0, data={"after_turn": 1, "messages": ["Answer."]})]
    along = AlongTheWay()
    along.add([greeted, late])
    assert along.line() == (
        "along the way: 1 chat turn followed by widget messages no turn read (a greeting the widget writes late reads "
        "each answer a turn late: chat.greeting) (chat_unread, 1 test); 1 widget greeting written before the first "
        "turn, read by no turn (chat.greeting: true reads it as turn 1) (chat_unread after_turn 0, 1 test)")
