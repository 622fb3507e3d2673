"""The audio toolkit every audio target shares (`pip install tamesu[voice]`).

One job per module:
- `formats`: what an audio stream is (encoding, rate) and the bytes of a 20 ms frame;
- `codecs`: pcm16, G.711 mu-law and A-law through `audioop` (`audioop-lts` from Python 3.13);
- `resample`: any rate to any rate;
- `tts`: the simulated user speaks (Piper with a voice a package ships, espeak-ng as the fallback);
- `noise`: the named background noises, generated, never downloaded;
- `pacing`: the user's audio goes out at a caller's wall-clock pace; the agent's is placed on a playback clock;
- `stt`: faster-whisper, loaded once per process and shared by every conversation;
- `vad`: speech segments with Silero VAD's ONNX file on onnxruntime (no torch);
- `wer`: word error rate with numbers normalised;
- `recorder`: both sides on one timeline, written as the stereo `audio.wav`;
- `metrics`: the audio metrics of a run, from the recorder and the turns;
- `behaviors`: the persona's `interrupt_probability`, `silence_after_turn_ms`, `background_noise`, seeded per run;
- `conversation`: the driver an audio target uses (docs/voice.md): speak a turn, take the agent's audio,
  barge in, finish with the artifacts and metrics.

Only `tamesu.audio.extra` (what is missing) and `tamesu.audio.measured` (the names of the metrics a call records)
may be imported by code that runs without the extra.
"""
