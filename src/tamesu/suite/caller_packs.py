"""Packs of caller behaviours a persona names at once (`behaviors: noisy_cafe`), as data: each is a set of
`persona.behaviors` keys (tamesu.audio.behaviors says what each does). A persona may name a pack and set keys
of its own over it (`behaviors: { pack: fast_talker, volume_db: -10 }`)."""

from __future__ import annotations

from typing import Any

PACKS: dict[str, dict[str, object]] = {
    "noisy_cafe": {"background_noise": {"name": "cafe", "level_db": -12, "between": True},
                   "silence_after_turn_ms": [300, 900]},
    "street_caller": {"background_noise": {"name": "street", "level_db": -10, "between": True}},
    "fast_talker": {"speaking_rate": 1.5, "silence_after_turn_ms": 100},
    "slow_talker": {"speaking_rate": 0.7, "silence_after_turn_ms": [800, 1500]},
    "quiet_caller": {"volume_db": -20},
    "hard_of_hearing_line": {"volume_db": -14, "background_noise": {"name": "hum", "level_db": -18,
                                                                   "between": True}},
    "hesitant": {"disfluency": 0.8, "speaking_rate": 0.85, "silence_after_turn_ms": [1200, 2500]},
    "spells_it_out": {"spell_out": True, "speaking_rate": 0.9},
}
"""What each pack varies (the README's voice section lists them with the same words)."""


def expand(value: object) -> Any:
    """A pack name, or a mapping with `pack:`, as the behaviours it stands for (the mapping's own keys win)."""
    if isinstance(value, str):
        if value not in PACKS:
            raise ValueError(f"unknown behaviour pack {value!r} (one of {', '.join(PACKS)})")
        return dict(PACKS[value])
    if isinstance(value, dict) and "pack" in value:
        own = {k: v for k, v in value.items() if k != "pack"}
        return {**expand(value["pack"]), **own}
    return value
