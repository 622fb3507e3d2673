"""The sample rate a steady stream's pace names, on arrivals as a starved tamesu reads them.

Seen once at load 15: the voice target's wrong-rate case (16 kHz audio, 8 kHz agreed: it arrives at 2x real
time) read by a tamesu that fell behind spanned more than its length, came in under the flood factor, and the
rate was never named. Here the reader is modelled exactly: each chunk is stamped at the reader's first wake-up
after it arrived (a backlog read at once), and it stalls 0.3 s every 0.6 s, and 2.3 s before its last read."""

from __future__ import annotations

from tamesu.audio.formats import AudioFormat
from tamesu.targets.audio.burst import STRICT_FLOOD_FACTOR, flood, pace_problem, past_the_cap, slow_pace
from tamesu.targets.audio.heard import Heard

RATE_KEY = "audio.sample_rate"
STARVED_WAKES = [float(ms) for start in (0, 900, 1800) for ms in range(start, start + 600)] + [4700.0]
"""When the reader runs: every ms for 0.6 s (keeping up), then not for 0.3 s, twice; then 0.6 s more, and not
from 2.4 s to 4.7 s. No stretch it kept up over is a second long (what a stream's pace end to end needed)."""


def _sent(chunks: int, every_ms: float, chunk_ms: float) -> list[tuple[float, float]]:
    """A paced sender's chunks: (arrival, duration as read at the agreed rate), a 1 ms jitter on every third."""
    return [(k * every_ms + (1.0 if k % 3 == 0 else 0.0), chunk_ms) for k in range(chunks)]


def _read(sent: list[tuple[float, float]], wakes: list[float]) -> Heard:
    """What the reader stamped: each chunk at the first wake-up at or after its arrival, a backlog 0.01 ms apart."""
    heard = Heard()
    last = -1.0
    for arrival, duration in sent:
        wake = next((w for w in wakes if w >= arrival), wakes[-1])
        stamp = max(wake, last + 0.01)
        heard.arrivals.append((stamp, duration))
        last = stamp
    heard.audio_ms = sum(duration for _at, duration in sent)
    return heard


def test_a_starved_reader_still_names_the_rate_of_a_stream_at_twice_real_time() -> None:
    heard = _read(_sent(150, 20.0, 40.0), STARVED_WAKES)  # 16 kHz read as 8 kHz: 40 ms of audio every 20 ms
    assert flood(heard, STRICT_FLOOD_FACTOR) is None  # end to end it came in under the flood factor
    problem = pace_problem(heard, None, AudioFormat("pcm16", 8000), False, RATE_KEY)
    assert problem is not None and "arrives steadily at 2.0x real time" in problem
    assert "is audio.sample_rate (8000) the rate the agent sends? (16000 Hz would play in real time" in problem


def test_a_starved_reader_takes_no_right_rate_for_another() -> None:
    fmt = AudioFormat("pcm16", 16000)
    right = _read(_sent(150, 20.0, 20.0), STARVED_WAKES)  # real time, read by the same starved reader
    assert pace_problem(right, flood(right, STRICT_FLOOD_FACTOR), fmt, False, RATE_KEY) is None
    behind = _read(_sent(150, 28.0, 20.0), STARVED_WAKES)  # a loaded sender behind its own clock: 0.7x
    assert pace_problem(behind, flood(behind, STRICT_FLOOD_FACTOR), fmt, False, RATE_KEY) is None
    # a reply in one burst, cut into the socket's segments: a few gaps between them, the rest back to back
    burst = Heard(arrivals=[(k * 0.01 + (k // 10) * 7.0, 20.0) for k in range(200)], audio_ms=4000.0)
    assert pace_problem(burst, "4.0s of audio arrived in 0.2s", fmt, False, RATE_KEY) is None
    # a sender catching up after it fell behind: 30 chunks at twice the pace among 150 at real time
    catching_up = _read(_sent(150, 20.0, 20.0) + [(3000 + k * 10.0, 20.0) for k in range(30)],
                        [float(ms) for ms in range(4000)])
    assert pace_problem(catching_up, None, fmt, False, RATE_KEY) is None


def test_a_flood_read_with_a_backlog_names_the_rate_of_its_pace_not_of_its_span() -> None:
    # seen on a loaded CI: a 16 kHz stream agreed as 8 kHz (2.0x) whose reader stalled, read a backlog at once, then
    # kept up; the longest stretch's span said 2.7x and named 22050 Hz. Chunk by chunk it is 2.0x: 16000 Hz
    arrivals = [(k * 20.0, 40.0) for k in range(30)] + [(900.0 + k * 0.1, 40.0) for k in range(20)] + \
        [(900.0 + k * 20.0, 40.0) for k in range(1, 60)]
    heard = Heard(arrivals=arrivals, audio_ms=sum(duration for _at, duration in arrivals))
    problem = pace_problem(heard, "4.4s of audio arrived in 2.1s", AudioFormat("pcm16", 8000), False, RATE_KEY)
    assert problem is not None and "arrives steadily at 2.0x real time" in problem, problem
    # the span's timing is said too, after the chunks': a reader's backlog may have thrown either
    assert "(16000 or 22050 Hz would play in real time" in problem, problem


def test_a_stream_at_a_fraction_of_real_time_is_said_with_the_rate_that_fits_also_by_a_starved_reader() -> None:
    # before: 8 kHz audio read as the agreed 16 kHz (10 ms of audio every 20 ms) passed without a word, heard sped
    # up with gaps ("Welcome to Dallas, check me out"); it is said, not failed (a loaded agent is slow too)
    fmt = AudioFormat("pcm16", 16000)
    for wakes in (None, STARVED_WAKES):
        heard = _read(_sent(150, 20.0, 10.0), wakes) if wakes else Heard(arrivals=_sent(150, 20.0, 10.0))
        said = slow_pace(heard, fmt, RATE_KEY)
        assert said is not None and "arrives steadily at 0.50x real time for pcm16 16000 Hz: is audio.sample_rate " \
            "(16000) the rate the agent sends? (8000 Hz would play in real time)" in said, (wakes is None, said)
    assert slow_pace(Heard(arrivals=_sent(150, 20.0, 10.0)), fmt, "") is None  # a target whose rate is fixed
    assert slow_pace(Heard(arrivals=_sent(150, 20.0, 20.0)), fmt, RATE_KEY) is None  # real time
    assert slow_pace(Heard(arrivals=_sent(150, 28.0, 20.0)), fmt, RATE_KEY) is None  # a loaded sender: 0.7x



def test_a_real_time_talker_read_after_a_late_first_read_is_no_flood() -> None:
    # seen at load 25-28 (test_voice_burst's /endless talker, 4 s turn_timeout): the reader's first read came 1 s
    # into the agent's speech, that second's chunks were stamped at once and the rest as they came: "4.0s of audio
    # arrived in 2.9s (faster than real time)", and the talker failed as a flood, not as one who never stops
    for wakes in (range(1000, 5000), range(1000, 5000, 37)):  # then keeping up; or waking every 37 ms
        late = _read(_sent(200, 20.0, 20.0), [float(ms) for ms in wakes])
        assert late.audio_ms > STRICT_FLOOD_FACTOR * (late.arrivals[-1][0] - late.arrivals[0][0] + 20.0)
        assert flood(late, STRICT_FLOOD_FACTOR) is None, wakes
    # the same backlog, then chunks at twice real time, is still a flood; and so is one burst of the whole reply
    twice = _read(_sent(50, 20.0, 20.0) + [(1000 + k * 10.0, 20.0) for k in range(150)],
                  [float(ms) for ms in range(1000, 5000)])
    assert flood(twice, STRICT_FLOOD_FACTOR) is not None
    burst = Heard(arrivals=[(k * 0.01, 20.0) for k in range(200)], audio_ms=4000.0)
    assert flood(burst, STRICT_FLOOD_FACTOR) == "4.0s of audio arrived in 0.0s (faster than real time)"


def test_a_line_streamed_in_real_time_through_a_long_wait_is_not_past_the_cap() -> None:
    # seen at load 33 (test_voice_burst's /line bridge, turn_timeout 20 s): the wait for the greeting's words
    # lasted 80 s (their transcription), the bridge streamed its silence all along, and the next turn failed "the
    # agent sent 70s of audio in one turn, more than 3 times turn_timeout (20s): read no further"
    line = _read(_sent(4000, 20.0, 20.0), [float(ms) for ms in range(0, 81_000, 7)])
    assert line.audio_ms == 80_000.0 and past_the_cap(line, 20.0, None) is None
    # 80 s of audio sent as fast as the socket takes it, read in 4 s, is
    flooded = Heard(arrivals=[(k * 1.0, 20.0) for k in range(4000)], audio_ms=80_000.0)
    assert past_the_cap(flooded, 20.0, None) == (
        "the agent sent 80s of audio in one turn, 76s of it ahead of real time, more than 3 times turn_timeout "
        "(20s): read no further (an agent whose audio never ends)")
    # how it came is asked only once past the cap: reading the pace goes over every chunk, at every message
    asked: list[Heard] = []
    assert past_the_cap(line, 20.0, lambda: asked.append(line) or "flooded") is None and not asked
    assert past_the_cap(flooded, 20.0, lambda: "4.0s of audio arrived in 0.0s").endswith(
        "read no further (4.0s of audio arrived in 0.0s)")
