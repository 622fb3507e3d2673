"""The `realtime` target: an agent that speaks the OpenAI Realtime protocol over a websocket."""
