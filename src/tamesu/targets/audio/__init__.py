"""What the audio targets share: the socket loop that plays the caller's speech and records the agent's."""
