"""Regenerate the committed ``*_pb2.py`` / ``*_pb2.pyi`` files from the ``.proto`` beside them.

Uses the protoc bundled with grpcio-tools (a dev dependency), so the output only
depends on the pinned tool version. Run: ``python -m formats.proto.generate``.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTOS = ("baml_outbound.proto",)


def generate(out_dir: Path) -> list[Path]:
    """Compile every schema in :data:`PROTOS` into ``out_dir``; return the written files."""
    from grpc_tools import protoc  # dev-only dependency, imported on use

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for proto in PROTOS:
        args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", proto]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed for {proto}")
        stem = proto.removesuffix(".proto")
        written += [out_dir / f"{stem}_pb2.py", out_dir / f"{stem}_pb2.pyi"]
    return written


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_DIR):
        print(path)
