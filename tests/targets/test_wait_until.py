"""How long the transcription of a `wait_for`'s listening may take: speech heard out before the wait's end has the
target's turn_timeout more (tamesu's speech-to-text behind on a loaded machine is not the agent's lateness: a CI
run's SIP wait was undecided, exit 3, though the agent had spoken 8 s before the end); an utterance heard out past
the end has no more (whether the phrase came in time is not known from its words)."""

from __future__ import annotations

import time

from tamesu.targets.audio.heard import wait_until


def test_speech_heard_out_before_the_wait_ends_is_transcribed_within_turn_timeout_more() -> None:
    started = time.monotonic() - 3.0  # a 12 s wait begun 3 s ago: its listening heard out with 9 s left
    until = wait_until(12.0, started, grace_s=15.0)
    assert until is not None and until == started + 12.0 + 15.0


def test_an_utterance_heard_out_past_the_wait_has_no_more_time() -> None:
    started = time.monotonic() - 5.0  # a 2 s wait begun 5 s ago: the utterance ran on past its end
    assert wait_until(2.0, started, grace_s=15.0) == started + 2.0


def test_a_listening_for_no_wait_is_not_bounded() -> None:
    assert wait_until(None, time.monotonic(), grace_s=15.0) is None


def test_an_utterance_heard_out_before_the_end_and_read_after_it_has_turn_timeout_more() -> None:
    # a late look: the wait's end passed while the utterance before was transcribed; this one fell quiet (its speech
    # and `idle`, on the line's clock) 2 s before the end
    started = time.monotonic() - 20.0  # a 12 s wait begun 20 s ago
    assert wait_until(12.0, started, grace_s=15.0, heard_out=started + 10.0) == started + 12.0 + 15.0
    assert wait_until(12.0, started, grace_s=15.0, heard_out=started + 13.0) == started + 12.0


def test_a_late_look_hears_what_began_by_the_end_and_nothing_after() -> None:
    from tamesu.targets.audio.heard import not_by

    assert not not_by(None, None, None, more=False)  # any other listening: its own limits
    # before the agent's speech: reads on while what it reads came by the end
    assert not not_by(12_000.0, None, 11_000.0, more=True)
    assert not_by(12_000.0, None, 11_000.0, more=False)  # nothing more came
    assert not_by(12_000.0, None, 12_500.0, more=True)  # came after the end
    assert not_by(12_000.0, None, None, more=True)
    assert not not_by(12_000.0, 11_900.0, 12_500.0, more=True)  # begun by the end: heard out as any utterance
    assert not_by(12_000.0, 12_100.0, 12_100.0, more=True)  # begun after it
