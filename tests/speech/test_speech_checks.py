"""`contains`, `not_contains`, `regex`, `not_regex`, captures and `wait_for` on spoken turns: read as speech;
on text turns, and with `match: exact`, exactly as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tamesu.checks import parse_assertion
from tamesu.checks.base import Exchange, RunView, Verdict
from tamesu.conversation import AgentTurn, Session, UserTurn
from tamesu.engine.capture import capture_from
from tamesu.roles.simulator import ScriptedUser
from tamesu.suite.schema import CaptureSpec, ScriptStep
from tamesu.suite.secrets import Redactor
from tamesu.suite.templates import Context

WHISPER = "Press one for appointment. Two for billing. Your order O R D one zero zero one is ready at seven p.m."


def _view(text: str, spoken: bool) -> RunView:
    turn = AgentTurn(text=text, spoken=spoken)
    return RunView(exchanges=[Exchange(1, UserTurn(text="hi"), turn)], metrics={}, captured={}, events=[],
                   tool_calls=[], context=Context(), base_dir=Path.cwd())


async def _verdict(entry: dict[str, Any], spoken: bool = True, text: str = WHISPER) -> Verdict:
    return await parse_assertion(entry).check.evaluate(_view(text, spoken))


async def test_contains_hears_speech_on_spoken_turns_only() -> None:
    heard = await _verdict({"contains": "press 2 for billing"})
    assert heard.passed and "as speech (turn 1" in heard.reason, heard.reason
    assert heard.evidence == ["Press one for appointment. Two for billing."]
    assert (await _verdict({"contains": "ORD-1001 is ready at 7pm"})).passed
    text = await _verdict({"contains": "press 2 for billing"}, spoken=False)
    assert not text.passed  # a text target keeps exact matching
    exact = await _verdict({"contains": {"value": "press 2 for billing", "match": "exact"}})
    assert not exact.passed


async def test_a_phrase_not_said_fails_with_what_came_closest() -> None:
    missed = await _verdict({"contains": "press 3 for pharmacy"})
    assert not missed.passed
    assert "expected the agent to say \"press 3 for pharmacy\"" in missed.reason
    similar = await _verdict({"contains": "press two for the billing team"})  # 4 of 6 words
    assert not similar.passed
    assert 'closest heard: "Press one for appointment. Two for billing." (4 of 6 words)' in similar.reason
    assert (await _verdict({"contains": {"value": "your order ORD-1001 is done", "similarity": 0.8}})).passed
    assert not (await _verdict({"contains": {"value": "your order ORD-1001 is done", "similarity": 0.9}})).passed


async def test_what_was_heard_is_quoted_on_one_line_as_other_reasons_quote() -> None:
    # before: Python reprs, "We're open at nine.\nPress two for" (in double quotes only for the apostrophe, the
    # line break as a backslash and an n) where every other reason quotes in double quotes on one line
    greeting = "We're open at nine.\nPress two for billing"
    found = await _verdict({"contains": "we're open at nine press two for billing"}, text=greeting)
    assert found.passed
    assert found.reason.endswith('heard "We\'re open at nine. Press two for billing" (the same words spoken))'), \
        found.reason
    missed = await _verdict({"contains": "we're open at ten press three for sales"}, text=greeting)
    assert not missed.passed
    assert missed.reason.endswith('; closest heard: "We\'re open at nine. Press two for" (5 of 9 words)'), \
        missed.reason
    said = await _verdict({"not_contains": "we're open at 9"}, text=greeting)
    assert not said.passed
    assert said.reason.endswith('said it aloud: heard "We\'re open at nine." (the same words spoken)'), said.reason


async def test_not_contains_fails_when_the_words_were_said_aloud() -> None:
    said = await _verdict({"not_contains": "ORD-1001"})
    assert not said.passed and "said it aloud" in said.reason
    assert (await _verdict({"not_contains": "ORD-1001"}, spoken=False)).passed
    assert (await _verdict({"not_contains": "ORD-1002"})).passed


async def test_regex_matches_the_words_as_spoken() -> None:
    found = await _verdict({"regex": r"ord (\d{4})"})
    assert found.passed and "as spoken" in found.reason and "ord 1001" in found.reason
    assert not (await _verdict({"regex": r"ord (\d{4})"}, spoken=False)).passed
    assert not (await _verdict({"regex": {"pattern": r"ord (\d{4})", "match": "exact"}})).passed
    assert not (await _verdict({"not_regex": r"\b2 for billing"})).passed
    assert (await _verdict({"not_regex": r"\b2 for billing"}, spoken=False)).passed


async def test_a_capture_reads_a_spoken_turn_as_spoken(tmp_path: Path) -> None:
    session = Session(context=Context(), artifacts_dir=tmp_path, redactor=Redactor(), run_id="r",
                      base_dir=tmp_path)
    specs = [CaptureSpec(name="order", regex=r"ord (\d+)")]
    captured: dict[str, Any] = {}
    await capture_from(AgentTurn(text=WHISPER), specs, captured, session)
    assert captured == {}
    await capture_from(AgentTurn(text=WHISPER, spoken=True), specs, captured, session)
    assert captured == {"order": "1001"}


async def test_wait_for_hears_a_greeting_split_in_two_and_fails_in_one_line() -> None:
    greeting = [Exchange(1, None, AgentTurn(text="Thank you for calling the clinic.", spoken=True))]
    user = ScriptedUser([ScriptStep(wait_for="press 2 for billing", timeout=5), ScriptStep(say="billing")],
                        Path.cwd())
    first = await user.next_turn(greeting, Context())
    assert first.turn is None and first.listen == 5  # not said yet: listen for up to the step's timeout
    more = [*greeting, Exchange(2, None, AgentTurn(text="Press one for appointment. Two for billing.",
                                                   spoken=True))]
    second = await user.next_turn(more, Context())
    assert second.turn is not None and second.turn.text == "billing"
    assert second.note is not None and "turn 2" in second.note["heard"]

    never = ScriptedUser([ScriptStep(wait_for="press 9 for pharmacy")], Path.cwd())
    assert (await never.next_turn(more, Context())).listen == 15  # the default timeout
    failed = await never.next_turn(more, Context())  # nothing more was heard
    assert failed.failure is not None and "\n" not in failed.failure
    assert failed.failure.startswith('script step 1 waited for "press 9 for pharmacy"; the agent said '
                                     '"Thank you for calling the clinic. / Press one for appointment. Two '
                                     'for billing." (closest: "Press one for'), failed.failure

    # quoted as the checks' reasons quote: before, Python reprs, "We're closed.\nPress one…" in double quotes
    # only because of the apostrophe, a line break as a backslash and an n, the closest words' break too
    closed = [Exchange(1, None, AgentTurn(text="We're closed.\nPress one for the desk.", spoken=True))]
    apostrophes = ScriptedUser([ScriptStep(wait_for="we're open, press two", timeout=0)], Path.cwd())
    missed = await apostrophes.next_turn(closed, Context())
    assert missed.failure == ('script step 1 waited 0s for "we\'re open, press two"; the agent said "We\'re closed. '
                              'Press one for the desk." (closest: "We\'re closed. Press", 2 of 4 words)'), \
        missed.failure

    text = ScriptedUser([ScriptStep(wait_for="press 2 for billing", match="exact", timeout=0)], Path.cwd())
    assert (await text.next_turn(more, Context())).failure is not None
