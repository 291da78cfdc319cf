"""Regenerate PulsarApi_pb2.py and PulsarApi_pb2.pyi from PulsarApi.proto.

Run with the project's dev environment (grpcio-tools and mypy-protobuf installed)::

    python protocols/pulsarwire/proto/regenerate.py

The outputs are committed, so users need only the ``protobuf`` runtime. The protoc bundled
with grpcio-tools stamps the generated module with the oldest runtime it accepts (see the
``ValidateProtobufRuntimeVersion`` call); keep pyproject's ``protobuf>=`` at least that high.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = "PulsarApi.proto"


def main() -> None:
    # mypy-protobuf installs its protoc plugin as a script next to the interpreter; look there
    # first so the script works from an unactivated venv.
    plugin = Path(sys.executable).with_name("protoc-gen-mypy")
    plugin_path = str(plugin) if plugin.exists() else shutil.which("protoc-gen-mypy")
    if plugin_path is None:
        sys.exit("protoc-gen-mypy not found: install mypy-protobuf")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--plugin=protoc-gen-mypy={plugin_path}",
            f"--proto_path={HERE}",
            f"--python_out={HERE}",
            f"--mypy_out={HERE}",
            PROTO,
        ],
        check=True,
    )
    print(f"regenerated {HERE / 'PulsarApi_pb2.py'} and {HERE / 'PulsarApi_pb2.pyi'}")


if __name__ == "__main__":
    main()
