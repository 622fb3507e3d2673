"""Version 1 of the turn API: `turn_pb2` (messages) and `turn_pb2_grpc` (`TurnServiceServicer`, `TurnServiceStub`,
`add_TurnServiceServicer_to_server`), generated from proto/tamesu/turn/v1/turn.proto by scripts/gen_turn_api.py.
Never edit the generated files: change the .proto and regenerate."""
