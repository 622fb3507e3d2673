"""The `grpc` target: an agent that implements tamesu's turn API (proto/tamesu/turn/v1)."""
