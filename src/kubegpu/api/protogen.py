"""Regenerates the committed Python code of our protos with grpcio-tools.

Owns the exact protoc invocation, so the committed files and the test that
diffs them against a fresh generation agree. Must not be imported at runtime
by the daemons: grpcio-tools is a development dependency only.

Usage: ``python -m kubegpu.api.protogen [OUTDIR]`` (default: the source tree).
"""

from __future__ import annotations

import sys
from pathlib import Path

#: Proto files, relative to the ``src`` directory that holds the package.
PROTOS = (
    "kubegpu/api/deviceplugin/v1beta1/api.proto",
    "kubegpu/api/podresources/v1/api.proto",
)

SRC_ROOT = Path(__file__).resolve().parents[2]


def generate(out_dir: Path) -> None:
    """Generate ``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` for every proto into ``out_dir``."""
    from grpc_tools import protoc  # dev-only dependency

    out_dir.mkdir(parents=True, exist_ok=True)
    for proto in PROTOS:
        (out_dir / proto).parent.mkdir(parents=True, exist_ok=True)
        rc = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{SRC_ROOT}",
                f"--python_out={out_dir}",
                f"--pyi_out={out_dir}",
                f"--grpc_python_out={out_dir}",
                str(SRC_ROOT / proto),
            ]
        )
        if rc != 0:
            raise RuntimeError(f"protoc failed on {proto} with exit code {rc}")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else SRC_ROOT)
