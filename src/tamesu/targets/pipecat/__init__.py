"""The `pipecat` target: a Pipecat bot over its protobuf frame websocket."""
