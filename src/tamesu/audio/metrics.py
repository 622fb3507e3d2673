"""The run-level audio metrics, from both recorded tracks and the turns' audio records.

- `talk_over_ratio`: time both sides speak at once (VAD on both tracks) over the agent's speech time.
- `silence_gap_max_ms`: the longest stretch with neither side speaking while a reply was expected: from
  the end of the user's speech to the end of the agent's reply's speech (the silence a line carries after it
  is none of it; with no reply, to the user's next words or the end of the recording).
- `stt_word_error_rate`: the agent's own transcript of the user, where the protocol reports one, against the
  text tamesu synthesised, numbers normalised; all edits over all words of the run.
Per-turn metrics (`time_to_first_audio_ms`, `interruption_stop_ms`) are the turns' own measures.

VAD decides speech in 32 ms windows, and its edges land up to a window (and, for a soft onset, two) away from
where the speech starts or ends: a silence measured from them was off by -40 to +68 ms against the agent's
own clock. Where a segment's surroundings are quiet (a clean line, the agent's track), each edge is moved to
the first or last millisecond louder than the segment's speech level less 35 dB, within 64 ms of where VAD put
it (and followed past it over short dips and up to 100 ms of a dropout: digital silence where nothing arrived
to play); over background noise the VAD edge stays, as the noise would pull the edge into itself.
"""

from __future__ import annotations

import numpy as np

from tamesu.audio import vad, wer
from tamesu.audio.clip import Clip
from tamesu.conversation import TurnAudio

Segments = list[tuple[float, float]]


def overlap(a: Segments, b: Segments) -> float:
    """The ms both lists of segments cover at once."""
    total, j = 0.0, 0
    for start, end in a:
        for other_start, other_end in b[j:]:
            if other_start >= end:
                break
            total += max(0.0, min(end, other_end) - max(start, other_start))
    return total


def _longest_gap(window: tuple[float, float], speech: Segments) -> float:
    start, end = window
    if end <= start:
        return 0.0
    cursor, longest = start, 0.0
    for seg_start, seg_end in sorted(speech):
        if seg_end <= cursor:
            continue
        if seg_start >= end:
            break
        longest = max(longest, seg_start - cursor)
        cursor = max(cursor, seg_end)
    return max(longest, end - cursor)


EDGE_DB = -35.0
"""An edge is where the speech is louder than the segment's level (its loud 1 ms frames) less this."""
EDGE_REACH_MS = 64
"""How far from VAD's edge the exact one is looked for: two VAD windows."""
EDGE_DIP_MS = 20
"""A dip below the edge threshold shorter than this inside a soft onset or tail does not end the speech."""
EDGE_DROPOUT_MS = 100
"""How much digital silence inside a soft onset or tail (a player with nothing to play) does not end the speech."""
EDGE_WALK_MS = 250
"""How far past VAD's edge a soft onset or tail is followed at most."""
_QUIET_MARGIN_DB = 6.0
"""The surroundings must be this much below the edge threshold for the edge to be sharpened."""


def _walk(levels: np.ndarray, threshold: float, at: int, step: int) -> int:
    """From the loud millisecond `at`, on in direction `step` over loud milliseconds, dips shorter than
    EDGE_DIP_MS and dropouts (`_next_loud`), to the last loud one: a soft onset (an "f", an "h") can start more
    than EDGE_REACH_MS before VAD's window, and stopping at the reach made a pause 19-27 ms long."""
    limit = at + step * EDGE_WALK_MS
    while True:
        ahead = _next_loud(levels, threshold, at, step)
        if ahead is None or (ahead - limit) * step > 0:
            return at
        at = ahead


def _next_loud(levels: np.ndarray, threshold: float, at: int, step: int) -> int | None:
    """The next loud millisecond after `at` in direction `step`, across a dip shorter than EDGE_DIP_MS and up
    to EDGE_DROPOUT_MS of digital silence (every sample 0: nothing arrived to play), or None. A reply that
    starts with a dropout is speech from its first sound: the reference bot's 8 kHz lines send a reply's first
    95 ms, then nothing for 25-75 ms (their resampler gives out audio in blocks), and VAD, hearing no speech in
    95 ms followed by a gap, started the reply after the gap (a silence 124-135 ms longer than the bot's)."""
    dip = dropout = 0
    at += step
    while 0 <= at < levels.size:
        if levels[at] > threshold:
            return at
        if levels[at] == 0 and dropout < EDGE_DROPOUT_MS:
            dropout += 1
        else:
            dip += 1
            if dip >= EDGE_DIP_MS:
                return None
        at += step
    return None


def _sound_before_dropout(levels: np.ndarray, threshold: float, start: int) -> int:
    """Where speech that starts at `start` began before a dropout shortly ahead of it: when the last run of
    digital silence within 2 * EDGE_REACH_MS before `start` is at most EDGE_DROPOUT_MS long and comes right
    after sound, the start of that sound. VAD hears a first 95 ms cut off by a dropout as no speech, and the
    speech after it can start softly (a 40 ms dip in "I can" stopped the walk short of the dropout: a wait
    198 ms longer than the bot's clock, twilio, two calls of three)."""
    lo = max(0, start - 2 * EDGE_REACH_MS)
    zeros = np.flatnonzero(levels[lo:start] == 0)
    if not zeros.size:
        return start
    end = lo + int(zeros[-1]) + 1
    begin = end - 1
    while begin > 0 and levels[begin - 1] == 0:
        begin -= 1
    if begin == 0 or end - begin > EDGE_DROPOUT_MS or levels[begin - 1] <= threshold:
        return start
    return _walk(levels, threshold, begin - 1, -1)


def _frame_levels(clip: Clip) -> np.ndarray:
    """The RMS of every millisecond of `clip`."""
    n = clip.rate // 1000
    x = clip.samples[: clip.samples.size // n * n].astype(np.float64).reshape(-1, n)
    return np.asarray(np.sqrt(np.mean(x * x, axis=1)))


def sharpened(clip: Clip, speech: Segments) -> Segments:
    """`speech` (VAD segments of `clip`, ms) with each edge moved to the millisecond where the speech starts or
    ends, where the audio around it is quiet enough to tell."""
    levels = _frame_levels(clip)
    out: Segments = []
    for start, end in speech:
        first, last = int(start), min(int(end), levels.size)
        if last <= first:
            out.append((start, end))
            continue
        threshold = float(np.percentile(levels[first:last], 95)) * 10 ** (EDGE_DB / 20)
        around = np.concatenate([levels[max(0, first - 2 * EDGE_REACH_MS):max(0, first - EDGE_REACH_MS)],
                                 levels[last + EDGE_REACH_MS:last + 2 * EDGE_REACH_MS]])
        if around.size and float(np.median(around)) > threshold * 10 ** (-_QUIET_MARGIN_DB / 20):
            out.append((start, end))  # noise around the speech: VAD's edge is the better guess
            continue
        lo, hi = max(0, first - EDGE_REACH_MS), min(levels.size, first + EDGE_REACH_MS)
        loud = np.flatnonzero(levels[lo:hi] > threshold)
        new_start = float(_walk(levels, threshold, lo + int(loud[0]), -1)) if loud.size else start
        new_start = float(_sound_before_dropout(levels, threshold, int(new_start)))
        lo, hi = max(0, last - EDGE_REACH_MS), min(levels.size, last + EDGE_REACH_MS)
        loud = np.flatnonzero(levels[lo:hi] > threshold)
        new_end = float(_walk(levels, threshold, lo + int(loud[-1]), 1) + 1) if loud.size else end
        out.append((new_start, max(new_start, new_end)))
    return out


def speech(clip: Clip) -> Segments:
    """Where `clip` is speaking (ms): the one definition of speaking every audio metric uses, and the reference
    agents time their own voice and the caller's by (docs/voice.md, "What counts as speaking")."""
    return sharpened(clip, vad.segments(clip))


def compute(user: Clip, agent: Clip, turns: list[TurnAudio]) -> dict[str, float]:
    user_speech, agent_speech = speech(user), speech(agent)
    out: dict[str, float] = {}
    agent_total = sum(end - start for start, end in agent_speech)
    if agent_total > 0:
        out["talk_over_ratio"] = round(overlap(user_speech, agent_speech) / agent_total, 4)
    both = sorted([*user_speech, *agent_speech])
    gaps = []
    track_end = user.duration_ms
    for i, turn in enumerate(turns):
        if turn.user_to_ms is None:
            continue
        if turn.agent_to_ms is not None:
            # the reply's last speech, not its last chunk: a line's silence after it, until the turn ended, is no
            # gap inside the reply
            spoken = [stop for start, stop in agent_speech if turn.user_to_ms < stop and start < turn.agent_to_ms]
            end = min(turn.agent_to_ms, max(spoken)) if spoken else turn.agent_to_ms
        else:
            later = [t.user_from_ms for t in turns[i + 1:] if t.user_from_ms is not None]
            end = later[0] if later else track_end
        gaps.append(_longest_gap((turn.user_to_ms, end), both))
    if gaps:
        out["silence_gap_max_ms"] = round(max(gaps), 1)
    pairs = [(t.said, t.agent_heard_user) for t in turns if t.said and t.agent_heard_user is not None]
    rate = wer.word_error_rate(pairs)
    if rate is not None:
        out["stt_word_error_rate"] = rate
    out["agent_speech_ms"] = round(agent_total, 1)
    out["user_speech_ms"] = round(sum(end - start for start, end in user_speech), 1)
    return out
