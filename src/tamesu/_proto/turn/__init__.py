"""tamesu's turn API, the gRPC service an agent implements for the `grpc` target (proto/tamesu/turn/v1)."""
