"""Audio that arrives faster than real time on an audio socket: a burst (a reply sent as fast as the socket
takes it, played on the playback clock as the realtime target's), or a steady stream at a multiple of real time
(a sample rate other than the agreed one)."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from tamesu.targets.audio.heard import Heard

if TYPE_CHECKING:  # the voice extra's numpy comes with it
    from collections.abc import Callable

    from tamesu.audio.formats import AudioFormat

FLOOD_FACTOR = 1.5
"""Audio arriving this many times faster than real time, for more than a second of it, is a flood."""
STRICT_FLOOD_FACTOR = 1.3
"""The same for an agent that must stream at real-time pace: twice the agreed rate shows as 2x, or as ~1.4x
when a loaded agent falls behind its own clock."""
STEADY_CHUNKS = 25
"""Chunks a stream must span before its pace says anything about its sample rate."""
STEADY_SPAN_MS = 1000.0
"""...and the time it must arrive over: a burst arrives in much less."""
STEADY_GAP_MS = 250.0
"""A pause longer than this in the arrivals is a sender that stopped (a burst, then another), not a stream."""
RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
"""The sample rates audio is sent at, for the one a stream's pace points to."""
RATE_TOLERANCE = 0.1
"""How near a usual rate's ratio a steady stream's pace must be to name that rate."""


AUDIO_CAP_TIMES = 3
"""A turn's audio ahead of real time by more than this many times `turn_timeout` (and `AUDIO_CAP_MARGIN_MS`) is
not read: a burst that long could not even be played within the turn."""
AUDIO_CAP_MARGIN_MS = 10_000.0


def past_the_cap(heard: Heard, turn_timeout: float, flooded: Callable[[], str | None] | None) -> str | None:
    """Why a turn's audio is read no further, or None: an agent whose audio never ends, sent faster than it plays,
    filled memory and disk (gigabytes in seconds) before `turn_timeout` came. Audio that came in real time is
    never past it: a phone bridge's silence streamed all through a wait that a loaded tamesu's transcription
    made 80 s long was "70s of audio in one turn, ... an agent whose audio never ends". `flooded` says how the
    audio came, asked only once past the cap (this runs at every message; reading the pace goes over every chunk)."""
    ahead = heard.audio_ms - (_wall_ms(heard) or 0.0)
    if ahead <= AUDIO_CAP_TIMES * turn_timeout * 1000 + AUDIO_CAP_MARGIN_MS:
        return None
    return (f"the agent sent {heard.audio_ms / 1000:.0f}s of audio in one turn, {ahead / 1000:.0f}s of it ahead of "
            f"real time, more than {AUDIO_CAP_TIMES} times turn_timeout ({turn_timeout:g}s): read no further "
            f"({(flooded and flooded()) or 'an agent whose audio never ends'})")


def flood(heard: Heard, factor: float) -> str | None:
    """What arrived faster than `factor` times real time, said in a reason; None when it did not, or when the
    last half of it or more came no faster (`_paced_since`): the rest came at once at its start."""
    wall_ms = _wall_ms(heard)
    if wall_ms is None:
        return None
    if heard.audio_ms > 1000 and heard.audio_ms > factor * max(wall_ms, 1.0) and not _paced_since(heard, factor):
        return f"{heard.audio_ms / 1000:.1f}s of audio arrived in {wall_ms / 1000:.1f}s (faster than real time)"
    return None


def _paced_since(heard: Heard, factor: float) -> bool:
    """Whether the audio from some chunk on, half of all that came or more (and over a second), arrived no faster
    than `factor` times real time. A reader's stamps are only ever late: a reader that made its first read late
    (a loaded tamesu still setting the call up) stamps what came before at once, and so does a real-time sender
    catching up on its own clock after a stall. End to end such a talker read as a flood ("4.0s of audio arrived
    in 2.9s" at load 28, where the agent's reply never ending was the reason)."""
    end = heard.arrivals[-1][0] + heard.arrivals[-1][1]
    since = 0.0
    for at, duration in reversed(heard.arrivals):
        since += duration
        if since > max(1000.0, heard.audio_ms / 2) and since <= factor * max(end - at, 1.0):
            return True
    return False


BURST_GAP_MS = 5.0
"""Chunks that typically arrive closer than this came in a burst (sent as fast as the socket takes them)."""


def steady_factor(arrivals: list[tuple[float, float]], rate: int) -> float | None:
    """How many times faster than real time a stream arrives when it arrives as a paced sender's at another
    sample rate: evenly, with no pause, over a second or more, at the ratio of a usual rate to `rate` (20 ms
    frames of 16 kHz audio read as 8 kHz arrive at 2x). The longest stretch without a pause is the one looked
    at (a reply's sentences may come apart). None for a burst, or any other pace."""
    runs: list[list[tuple[float, float]]] = [[]]
    for previous, chunk in itertools.pairwise([(arrivals[0][0], 0.0), *arrivals] if arrivals else []):
        if chunk[0] - previous[0] > STEADY_GAP_MS:
            runs.append([])
        runs[-1].append(chunk)
    run = max(runs, key=lambda r: r[-1][0] - r[0][0] if r else 0.0)
    if len(run) < STEADY_CHUNKS or run[-1][0] - run[0][0] < STEADY_SPAN_MS:
        return None
    first, span = run[0][0], run[-1][0] - run[0][0]
    total = sum(duration for _at, duration in run)
    early = sum(duration for at, duration in run if at <= first + span / 2)
    if not 0.3 <= early / total <= 0.7:
        return None
    return other_rate((total - run[-1][1]) / span, rate)  # the last chunk's audio is after the span's end

def likely_rate(measured: float) -> int:
    """The usual sample rate nearest (by ratio) to the one a stream's pace measured."""
    return min(RATES, key=lambda rate: abs(math.log(rate / max(measured, 1.0))))


PACE_SPREAD = 0.15
"""How near a chunk's pace must be to the median pace to count as that pace."""


def paced_factor(arrivals: list[tuple[float, float]]) -> float | None:
    """How many times faster than real time a paced sender's chunks come, judged chunk by chunk: a chunk's
    length over the time to the next one, only where the reader took them as they came. A starved reader reads
    a backlog at once after a stall (gaps under BURST_GAP_MS: left out) or stalls long (over STEADY_GAP_MS: left
    out); measured end to end instead, a 2x stream read by a tamesu that fell behind spanned more than its
    length, came in under the flood factor, and its rate was never named. The median pace, when at least
    STEADY_CHUNKS gaps were taken as they came and most of them are within PACE_SPREAD of it (not a burst's few
    stray gaps, nor a sender's short catch-up); else None."""
    ratios = sorted(previous[1] / (chunk[0] - previous[0]) for previous, chunk in itertools.pairwise(arrivals)
                    if BURST_GAP_MS <= chunk[0] - previous[0] <= STEADY_GAP_MS)
    if len(ratios) < STEADY_CHUNKS:
        return None
    middle = ratios[len(ratios) // 2]
    near = sum(1 for ratio in ratios if abs(ratio / middle - 1) <= PACE_SPREAD)
    return middle if near >= max(STEADY_CHUNKS, len(ratios) / 2) else None


def other_rate(factor: float | None, rate: int) -> float | None:
    """`factor` when a stream arriving that many times faster than real time is one at a usual rate other than
    `rate` (within RATE_TOLERANCE), else None."""
    if factor is None:
        return None
    sent_at = likely_rate(rate * factor)
    return factor if sent_at != rate and abs(rate * factor / sent_at - 1) <= RATE_TOLERANCE else None


SLOW_RATES = (8000, 16000, 24000, 48000)
"""The rates a stream slower than real time is taken to be sent at: the telephony and speech ones only, so a
loaded sender at 0.7x is not "11025 Hz"."""
SLOW_TOLERANCE = 0.05


def slow_pace(heard: Heard, fmt: AudioFormat, rate_key: str) -> str | None:
    """What a stream whose chunks come steadily at a usual rate's fraction of real time says, or None: 8 kHz audio
    read as 16 kHz plays at twice its speed with gaps (Whisper heard "Welcome to Dallas, check me out"), and the
    turn passed without a word. Not a failure: a loaded agent behind its own clock is slower than real time too."""
    if not rate_key:
        return None
    # chunk by chunk, else end to end over the longest stretch without a pause: a loaded reader's stamps throw
    # either one off (a backlog read at once, a stall)
    for factor in (paced_factor(heard.arrivals), _run_factor(heard.arrivals)):
        if factor is None or factor * STRICT_FLOOD_FACTOR > 1:
            continue
        sent = min(SLOW_RATES, key=lambda rate: abs(math.log(rate / (fmt.rate * factor))))
        if sent < fmt.rate and abs(fmt.rate * factor / sent - 1) <= SLOW_TOLERANCE:
            return (f"the agent's audio arrives steadily at {factor:.2f}x real time for {fmt}: is {rate_key} "
                    f"({fmt.rate}) the rate the agent sends? ({sent} Hz would play in real time)")
    return None


def _run_factor(arrivals: list[tuple[float, float]]) -> float | None:
    """The pace of the longest stretch of arrivals without a pause (as `steady_factor` takes it), any pace."""
    runs: list[list[tuple[float, float]]] = [[]]
    for previous, chunk in itertools.pairwise(arrivals):
        if chunk[0] - previous[0] > STEADY_GAP_MS:
            runs.append([])
        runs[-1].append(chunk)
    run = max(runs, key=len)
    if len(run) < STEADY_CHUNKS or run[-1][0] - run[0][0] < STEADY_SPAN_MS:
        return None
    return sum(duration for _at, duration in run[:-1]) / (run[-1][0] - run[0][0])


def pace_problem(heard: Heard, flood: str | None, fmt: AudioFormat, paced_key: str | bool,
                 rate_key: str) -> str | None:
    """Why audio faster than real time (`flood`) fails the turn, or None: a burst plays on the playback clock;
    an agent that must pace itself (`paced_key`, the option that says so) must not send one; a steady stream at
    a usual rate's multiple of real time has another sample rate than `fmt`'s (`rate_key`, the option). Without
    a flood, only a stream whose chunks came at another rate's pace one by one (`paced_factor`) fails."""
    if paced_key and flood:
        return (f"the agent's audio arrives faster than real time for {fmt}: {flood}; {paced_key} is true, so the "
                f"agent must send at real-time pace (or is {rate_key} ({fmt.rate}) not the rate it sends?)")
    if not rate_key:
        return None
    chunkwise = paced_factor(heard.arrivals)
    # slower than real time is a sender behind its own clock (a loaded bot), never taken for another rate
    paced = other_rate(chunkwise, fmt.rate) if chunkwise is not None and chunkwise >= STRICT_FLOOD_FACTOR else None
    # chunk by chunk first: the span of a stretch read by a loaded tamesu (its start late, then a backlog at once)
    # measured 2.7x of a 2.0x stream, and named 22050 Hz for a 16 kHz agent
    steady = steady_factor(heard.arrivals, fmt.rate) if flood else None
    factor = (paced or steady) if flood else paced
    if factor is None:
        return None
    # each way of timing it may be thrown by a loaded reader (a backlog read at once, a stall): every usual rate
    # one of them names is said, the chosen one's first (a loaded CI named 22050 Hz alone for a 16 kHz agent)
    whole = other_rate(_whole_factor(heard), fmt.rate) if flood else None
    named = list(dict.fromkeys(likely_rate(fmt.rate * f) for f in (factor, paced, steady, whole) if f is not None))
    return (f"the agent's audio arrives steadily at {factor:.1f}x real time for {fmt}{f' ({flood})' if flood else ''}: "
            f"is {rate_key} ({fmt.rate}) the rate the agent sends? ({' or '.join(map(str, named))} Hz would play "
            "in real time; a reply sent in one burst is fine)")


def _wall_ms(heard: Heard) -> float | None:
    """From the first chunk's arrival to the end of the last one's slot: a paced stream spans its duration. The
    reader's stamps, not when the turn read the chunks: audio that came while the caller spoke is read at once
    after the caller's last frame, and timed so it was "2.0s of audio in 0.0s" from a paced agent (a flood
    event, and a failed turn with `audio.paced: true`)."""
    if not heard.arrivals:
        return None
    return heard.arrivals[-1][0] - heard.arrivals[0][0] + heard.arrivals[-1][1]


def _whole_factor(heard: Heard) -> float | None:
    """The whole reply's pace end to end (as `flood` measures it)."""
    wall_ms = _wall_ms(heard)
    return None if wall_ms is None else heard.audio_ms / max(wall_ms, 1.0)
