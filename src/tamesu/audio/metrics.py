"""The run-level audio metrics, from both recorded tracks and the turns' audio records.

- `talk_over_ratio`: time both sides speak at once (VAD on both tracks) over the agent's speech time.
- `silence_gap_max_ms`: the longest stretch with neither side speaking while a reply was expected: from
  the end of the user's speech to the end of the agent's reply (or, with no reply, to the user's next words
  or the end of the recording).
- `stt_word_error_rate`: the agent's own transcript of the user, where the protocol reports one, against the
  text tamesu synthesised, numbers normalised; all edits over all words of the run.
Per-turn metrics (`time_to_first_audio_ms`, `interruption_stop_ms`) are the turns' own measures.
"""

from __future__ import annotations

from tamesu.audio import vad, wer
from tamesu.audio.clip import Clip
from tamesu.conversation import TurnAudio

Segments = list[tuple[float, float]]


def _overlap(a: Segments, b: Segments) -> float:
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


def compute(user: Clip, agent: Clip, turns: list[TurnAudio]) -> dict[str, float]:
    user_speech, agent_speech = vad.segments(user), vad.segments(agent)
    out: dict[str, float] = {}
    agent_total = sum(end - start for start, end in agent_speech)
    if agent_total > 0:
        out["talk_over_ratio"] = round(_overlap(user_speech, agent_speech) / agent_total, 4)
    both = sorted([*user_speech, *agent_speech])
    gaps = []
    track_end = user.duration_ms
    for i, turn in enumerate(turns):
        if turn.user_to_ms is None:
            continue
        if turn.agent_to_ms is not None:
            end = turn.agent_to_ms
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
