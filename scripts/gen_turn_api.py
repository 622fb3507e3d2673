"""Regenerate the Python stubs of tamesu's .proto files: the turn API (src/tamesu/_proto/turn/v1/, from
proto/tamesu/turn/v1/turn.proto) and the frames of a Pipecat bot's protobuf transport
(src/tamesu/_proto/pipecat/v1/, from proto/tamesu/pipecat/v1/frames.proto, messages only). The proto packages
keep their names on the wire (`tamesu.turn.v1.TurnService`); only the Python modules live under `_proto`,
and agents import the turn API's from `tamesu.turn.v1`, which re-exports them.

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
OUT = ROOT / "src" / "tamesu" / "_proto"
# each .proto, and whether it has a service (then its grpc stubs are generated too)
PROTOS = [(Path("tamesu/turn/v1/turn.proto"), True), (Path("tamesu/pipecat/v1/frames.proto"), False)]


def generated(proto: Path, grpc: bool) -> list[Path]:
    """The stubs of one .proto, relative to OUT (the .proto's path less its leading `tamesu/`)."""
    stem = proto.parent.relative_to("tamesu") / proto.stem
    names = [f"{stem}_pb2.py", f"{stem}_pb2.pyi"] + ([f"{stem}_pb2_grpc.py"] if grpc else [])
    return [Path(name) for name in names]


def generate(out: Path) -> None:
    from grpc_tools import protoc

    well_known = resources.files("grpc_tools").joinpath("_proto")  # google/protobuf/struct.proto
    with tempfile.TemporaryDirectory() as raw_dir:
        raw = Path(raw_dir)
        for proto, grpc in PROTOS:
            outputs = [f"--python_out={raw}", f"--pyi_out={raw}"] + ([f"--grpc_python_out={raw}"] if grpc else [])
            code = protoc.main(["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", *outputs,
                                str(PROTO_ROOT / proto)])
            if code != 0:
                raise SystemExit(f"protoc failed on {proto} (exit {code})")
            # protoc names the Python modules after the .proto's path; they live under tamesu._proto
            for name in generated(proto, grpc):
                text = (raw / "tamesu" / name).read_text()
                for package in ("turn", "pipecat"):
                    text = text.replace(f"from tamesu.{package}.", f"from tamesu._proto.{package}.")
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    if not args.check:
        generate(OUT)
        print("wrote " + ", ".join(str(name) for proto, grpc in PROTOS for name in generated(proto, grpc)))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        generate(Path(scratch))
        stale = [str(name) for proto, grpc in PROTOS for name in generated(proto, grpc)
                 if not (OUT / name).exists()
                 or not filecmp.cmp(Path(scratch) / name, OUT / name, shallow=False)]
    if stale:
        print(f"stale: {', '.join(stale)} (run python scripts/gen_turn_api.py)", file=sys.stderr)
        return 1
    print("the stubs match their .proto files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
