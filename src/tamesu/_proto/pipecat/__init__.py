"""The wire of a Pipecat bot's protobuf frame transport, as tamesu writes it (see tamesu.pipecat.v1)."""
