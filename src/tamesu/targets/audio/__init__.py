"""What the audio targets share: `listen`, the loop that hears a reply from timed chunks of a call's audio
(`sip`, `livekit`), with the one `POLL_S` every audio target looks at what arrived; and `socket`, the call
over one websocket that plays the caller's speech and records the agent's (`twilio`, `voice`, `pipecat`)."""
