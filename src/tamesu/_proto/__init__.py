"""Generated protobuf stubs (scripts/gen_turn_api.py): never edited by hand."""
