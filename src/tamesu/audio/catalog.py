"""Names a suite may use for audio, importable without the `voice` extra (the loader checks them)."""

NOISES = ("white", "pink", "brown", "hum", "cafe", "street", "office")
"""The background noises `tamesu.audio.noise` generates."""
