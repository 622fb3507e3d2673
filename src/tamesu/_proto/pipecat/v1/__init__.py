"""Version 1 of the Pipecat frame wire: `frames_pb2` (`Frame` and its text, audio, transcription, message and
interruption frames), generated from proto/tamesu/pipecat/v1/frames.proto by scripts/gen_turn_api.py. Never edit
the generated file: change the .proto and regenerate."""
