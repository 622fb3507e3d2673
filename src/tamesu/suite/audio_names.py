"""Names a suite may use for audio, importable without the `voice` extra (the schema checks them; `tamesu.audio`
makes what they name)."""

NOISES = ("white", "pink", "brown", "hum", "cafe", "street", "office")
"""The background noises `tamesu.audio.noise` generates."""
