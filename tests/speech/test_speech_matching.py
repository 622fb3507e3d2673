"""The speech normaliser and phrase matcher (tamesu.speech) on what Whisper really writes for phone prompts."""

from __future__ import annotations

import re

import pytest

from tamesu.speech.phrase import Heard, closest, find, search
from tamesu.speech.words import spoken, tokens


def _words(text: str) -> list[str]:
    return [t.text for t in tokens(text)]


@pytest.mark.parametrize(("written", "said"), [
    ("Press 2 for billing.", "press two for billing"),
    ("We open at 7pm", "we open at seven p.m."),
    ("We open at 7pm", "We open at 7 PM"),
    ("Your order ORD-1001 shipped", "your order O R D one zero zero one shipped"),
    ("Your order ORD-1001 shipped", "Your order O-R-D 1001 shipped"),
    ("It costs $42", "it costs forty two"),
    ("Room 105", "room one hundred and five"),
    ("In 2026", "in twenty twenty six"),
    ("In 2026", "in two thousand twenty six"),
    ("on the 2nd", "on the second"),
    ("100% sure", "one hundred percent sure"),
    ("Tom & Jerry", "tom and jerry"),
    ("1,000 calls", "one thousand calls"),
    ("Hello, I can help.", "Um, hello, uh, I can help"),
    ("Don't hang up", "dont hang up"),
])
def test_written_and_spoken_forms_are_the_same_words(written: str, said: str) -> None:
    assert _words(written) == _words(said)


def test_numbers_are_runs_of_digits_and_keep_their_source_span() -> None:
    text = "Press one zero zero one now"
    found = tokens(text)
    assert [t.text for t in found] == ["press", "1", "0", "0", "1", "now"]
    digit = found[1]
    assert text[digit.start:digit.end] == "one zero zero one"  # every digit quotes the words it came from
    assert _words("twenty twenty six") == ["2", "0", "2", "6"]
    assert _words("one two three") == ["1", "2", "3"]
    assert _words("nineteen ninety nine") == ["1", "9", "9", "9"]
    assert _words("four point five") == _words("4.5") == ["4", "point", "5"]


def test_fillers_vanish_and_words_that_are_not_numbers_stay() -> None:
    assert _words("Umm... so, er, the hmm answer") == ["so", "the", "answer"]
    assert _words("someone often") == ["someone", "often"]  # "one", "ten" inside words are not numbers
    assert _words("A B") == ["ab"] and _words("a table") == ["a", "table"]


def test_the_spoken_form_keeps_each_number_together_for_patterns() -> None:
    assert spoken("Press one for appointment. Two for billing.") == "press 1 for appointment 2 for billing"
    assert spoken("order O R D one zero zero one") == "order ord 1001"
    assert spoken("Your balance is forty two dollars") == "your balance is 42 dollars"
    assert spoken("Press 1, 2 or 3") == "press 1 2 or 3"


IVR = [Heard(1, "Thank you for calling the clinic."), Heard(2, "Press one for appointment. Two for billing.")]


def test_a_phrase_is_heard_however_it_was_written() -> None:
    match = find("press 2 for billing", IVR)
    assert match is not None and match.where == 2 and match.how == "normalised"
    assert match.quote == "Press one for appointment. Two for billing."  # "2 for billing" after "press" in 8 words
    assert "the same words spoken" in match.describe()
    exact = find("for billing", IVR)
    assert exact is not None and exact.how == "exact"


def test_a_phrase_may_span_two_utterances() -> None:
    match = find("the clinic press one for appointments", IVR)
    assert match is not None and match.where == 1
    assert match.quote == "the clinic. … Press one for appointment."


def test_one_word_in_five_may_be_misheard_but_no_number() -> None:
    match = find("thank you for phoning the clinic", IVR)  # 5 of 6 words
    assert match is not None and match.how == "similar" and match.matched == 5
    assert "5 of 6 words" in match.describe()
    assert find("thank you for phoning the clinic", IVR, similarity=0.9) is None  # tightened
    assert find("thanks for phoning the shop", IVR) is None  # 3 of 5
    assert find("press 3 for billing", IVR) is None  # a number is never forgiven
    assert find("press two for pharmacy", IVR) is None  # 3 of 4 is below 0.8
    assert find("press 9", IVR) is None


def test_the_words_must_be_in_order_and_close_together() -> None:
    assert find("billing for two", IVR) is None  # all heard, not in this order
    far = [Heard(1, "press the button on the left side of the old phone for help with billing")]
    assert find("press for billing", far) is None  # 3 words spread over 14
    assert find("press for billing", [Heard(1, "press it for billing")]) is not None


def test_closest_says_how_near_a_phrase_that_was_not_heard_came() -> None:
    near = closest("thanks for phoning the shop", IVR)
    assert near is not None and near.matched == 3 and near.words == 5
    assert closest("zebra crossing", IVR) is None


def test_a_pattern_is_tried_as_written_then_as_spoken() -> None:
    found = search(re.compile(r"(\d+) for billing"), IVR)
    assert found is not None
    utterance, match, as_spoken = found
    assert (utterance.where, match.group(1), as_spoken) == (2, "2", True)
    found = search(re.compile(r"clinic"), IVR)
    assert found is not None and found[2] is False
    assert search(re.compile(r"\d{4}"), IVR) is None


def test_a_digit_said_alone_may_be_written_as_a_word_that_sounds_like_it() -> None:
    heard = [Heard(1, "press one for appointment to for billing.")]  # Whisper on a phone line
    match = find("press 2 for billing", heard)
    assert match is not None and match.quote == "press one for appointment to for billing."
    assert find("press to for billing", [Heard(1, "press 2 for billing")]) is None  # never the other way
    assert find("press 3 for billing", heard) is None
