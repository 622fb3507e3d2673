"""tamesu's turn API (proto/tamesu/turn/v1/turn.proto) for agents written in Python: `tamesu.turn.v1`."""
