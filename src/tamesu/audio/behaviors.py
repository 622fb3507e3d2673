"""The persona's behaviours, decided by a generator seeded per run (the same run number repeats them).

- `interrupt_probability`: each agent reply, the user talks over it with this probability, after a random
  300-1200 ms of the reply has played (a reply shorter than that is not interrupted).
- `silence_after_turn_ms: [min, max]` (or one number): the user waits this long after the agent's reply
  before speaking.
- `background_noise`: a name from `tamesu.audio.noise` (or `{name, level_db, between}`), mixed under the speech,
  and with `between: true` also sent on the open line between utterances.
- `speaking_rate`: the voice synthesises faster or slower (Piper's length scale, espeak-ng's words per minute).
- `volume_db`: the speech (not the noise) made louder or quieter.
- `disfluency`: per utterance, the chance of an "um" and a restart (`tamesu.audio.wording`).
- `spell_out`: numbers and codes read digit by digit (`tamesu.audio.wording`).
A pack (`noisy_cafe`, `fast_talker`...) is a set of these (`tamesu.suite.caller_packs`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tamesu.audio import wording
from tamesu.audio.noise import DEFAULT_LEVEL_DB

INTERRUPT_AFTER_MS = (300.0, 1200.0)


@dataclass
class Noise:
    name: str
    level_db: float = DEFAULT_LEVEL_DB
    between: bool = False


class Behaviour:
    def __init__(self, behaviors: object, seed: int) -> None:
        self._rng = random.Random(seed)
        self.seed = seed
        self.interrupt_probability = float(getattr(behaviors, "interrupt_probability", None) or 0.0)
        silence = getattr(behaviors, "silence_after_turn_ms", None)
        if silence is None:
            self._silence: tuple[float, float] = (0.0, 0.0)
        elif isinstance(silence, int | float):
            self._silence = (float(silence), float(silence))
        else:
            low, high = (list(silence) + list(silence))[:2]
            self._silence = (float(min(low, high)), float(max(low, high)))
        noise = getattr(behaviors, "background_noise", None)
        if isinstance(noise, str):
            self.noise: Noise | None = Noise(noise)
        elif noise is not None:
            self.noise = Noise(noise.name, noise.level_db, bool(getattr(noise, "between", False)))
        else:
            self.noise = None
        self.speaking_rate = float(getattr(behaviors, "speaking_rate", None) or 1.0)
        self.volume_db = float(getattr(behaviors, "volume_db", None) or 0.0)
        self.disfluency = float(getattr(behaviors, "disfluency", None) or 0.0)
        self.spell_out = bool(getattr(behaviors, "spell_out", False))

    def words(self, text: str) -> str:
        """The line as this caller says it: spelled out, hesitant (a draw per utterance, when asked for)."""
        if self.spell_out:
            text = wording.spelled(text)
        if self.disfluency > 0 and text.strip() and self._rng.random() < self.disfluency:
            text = wording.hesitant(text, self._rng)
        return text

    def planned_words(self, text: str) -> str:
        """The line as `words` says it when no hesitation is drawn, drawing nothing: what a voice can synthesise
        before the line is due (a hesitation drawn then makes other words, synthesised then)."""
        return wording.spelled(text) if self.spell_out else text

    def interrupts(self) -> float | None:
        """For this agent reply: after how many ms of it the user talks over it, or None."""
        if self.interrupt_probability <= 0 or self._rng.random() >= self.interrupt_probability:
            return None
        return round(self._rng.uniform(*INTERRUPT_AFTER_MS), 1)

    def silence_ms(self) -> float:
        low, high = self._silence
        return low if low == high else round(self._rng.uniform(low, high), 1)

    def noise_seed(self) -> int:
        return self._rng.randrange(2**31)
