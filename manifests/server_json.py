"""server.json as a release publishes it: the committed file with the bundle's SHA-256 in place of
the placeholder.

    python manifests/server_json.py dist/corrigenda-<version>.mcpb --out dist/server.json

The MCP registry's schema requires `fileSha256` for an `mcpb` package, and clients check the file
they download against it. The hash is known only once the release has built the bundle, so the
committed server.json carries 64 zeros (which the schema's pattern accepts) and the release
workflow (.github/workflows/release.yml) writes this file, with the real hash, next to the bundle.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PLACEHOLDER = "0" * 64


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stamp(server: dict[str, Any], bundle: Path) -> dict[str, Any]:
    """A copy of `server` whose mcpb package carries the SHA-256 of `bundle`; refuses a bundle that
    is not the one the package names (its URL ends with the file's name)."""
    stamped = json.loads(json.dumps(server))
    (package,) = [p for p in stamped["packages"] if p["registryType"] == "mcpb"]
    if package["fileSha256"] != PLACEHOLDER:
        raise SystemExit(f"server.json's mcpb package has fileSha256 {package['fileSha256']}, not the placeholder")
    if package["identifier"].rsplit("/", 1)[-1] != bundle.name:
        raise SystemExit(f"server.json names {package['identifier']}, but the bundle is {bundle.name}")
    package["fileSha256"] = sha256(bundle)
    return stamped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("bundle", type=Path, help="the .mcpb that manifests/mcpb/build.py wrote")
    parser.add_argument("--out", type=Path, required=True, help="where the stamped server.json goes")
    arguments = parser.parse_args()
    server = json.loads((HERE / "server.json").read_text(encoding="utf-8"))
    stamped = stamp(server, arguments.bundle)
    arguments.out.write_text(json.dumps(stamped, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{arguments.out}: fileSha256 of {arguments.bundle.name}")


if __name__ == "__main__":
    main()
