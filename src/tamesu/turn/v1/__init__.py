"""The turn API's Python stubs, v1, for an agent to implement (docs/grpc.md):

    from tamesu.turn.v1 import turn_pb2, turn_pb2_grpc

    class Agent(turn_pb2_grpc.TurnServiceServicer): ...

The stubs are generated into `tamesu._proto` (`make proto`), which is private: its layout may change with the
generator, this path does not. The proto package, and so the service's name on the wire, is `tamesu.turn.v1`.
"""

from tamesu._proto.turn.v1 import turn_pb2, turn_pb2_grpc

__all__ = ["turn_pb2", "turn_pb2_grpc"]
