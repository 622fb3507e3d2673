"""Regenerate the Python stubs of tamesu's turn API (src/tamesu/turn/v1/) from proto/tamesu/turn/v1/turn.proto.

    python scripts/gen_turn_api.py           # writes the stubs (also: make proto)
    python scripts/gen_turn_api.py --check   # exits 1 when the committed stubs differ from what the .proto gives

Uses grpcio-tools' bundled protoc (a dev dependency), so no system protoc is needed. The generated files are
committed: installing tamesu never needs grpcio-tools.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO = Path("tamesu/turn/v1/turn.proto")
OUT = ROOT / "src"
GENERATED = ["turn_pb2.py", "turn_pb2.pyi", "turn_pb2_grpc.py"]


def generate(out: Path) -> None:
    from grpc_tools import protoc

    well_known = resources.files("grpc_tools").joinpath("_proto")  # google/protobuf/struct.proto
    code = protoc.main([
        "grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}",
        f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}", str(PROTO_ROOT / PROTO)])
    if code != 0:
        raise SystemExit(f"protoc failed on {PROTO} (exit {code})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    if not args.check:
        generate(OUT)
        print(f"wrote {', '.join(GENERATED)} in {OUT / PROTO.parent}")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        generate(Path(scratch))
        stale = [name for name in GENERATED
                 if not (OUT / PROTO.parent / name).exists()
                 or not filecmp.cmp(Path(scratch) / PROTO.parent / name, OUT / PROTO.parent / name, shallow=False)]
    if stale:
        print(f"stale: {', '.join(stale)} (run python scripts/gen_turn_api.py)", file=sys.stderr)
        return 1
    print("the turn API stubs match the .proto")
    return 0


if __name__ == "__main__":
    sys.exit(main())
