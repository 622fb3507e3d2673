"""The names of the metrics an audio conversation records (`conversation.AudioConversation`): each turn's measures,
and at the call's end `metrics.compute`'s, the user's frames' lateness (`pacing`) and the event loop's (`lag`).
Importable without the voice extra, as `extra` is: every audio target declares them (`Target.metric_names`), so an
SLO on a misspelt one is refused before the run (`plan._slo_names`), and a run's recorded names are held to them
(tests/targets/test_voice_burst.py)."""

from __future__ import annotations

PER_TURN = frozenset({"time_to_first_audio_ms", "barge_in_late_ms"})
"""`AudioConversation.end_turn`'s measures: distributions, read with `_p50`, `_p95`, `_max`..."""
OF_THE_CALL = frozenset({"talk_over_ratio", "silence_gap_max_ms", "stt_word_error_rate", "agent_speech_ms",
                         "user_speech_ms"})
"""`metrics.compute`'s, from both tracks and the turns."""
PACE = frozenset({"frame_late_ms_p50", "frame_late_ms_p99", "frame_late_ms_max", "loop_lag_ms_p99", "loop_lag_ms_max",
                  "loop_cpu_ms", "loop_runqueue_ms"})
"""`Pacer.lateness` and `LoopLag.since`: each a statistic already, so no other `_pNN` of them is measured."""
RECORDED = PER_TURN | OF_THE_CALL | PACE
"""Every metric an audio call records, whatever its target (each adds its own: `greeting_ms`, its counters...)."""
GREETING = "greeting_ms"
STOP = "interruption_stop_ms"
"""The wait for the agent's first words, and a barge-in's stop: recorded by the audio targets that have them."""
SPOKEN = RECORDED | {GREETING, STOP}
"""The metrics only a call in audio measures: a `metric` on one, on a target that speaks no audio, could only fail
(`plan._fit`)."""
