"""Build the Claude Desktop bundle, dist/corrigenda-<version>.mcpb.

    .venv/bin/python manifests/mcpb/build.py [--out DIR]

The bundle is of MCPB server type "uv" (manifests/README.md says why): it carries corrigenda's
wheel, a pyproject.toml whose dependencies Claude Desktop installs with uv, the Python version,
the entry point and the manifest. The manifest's tool list is written here from the registered
tools, so it cannot drift from the server. Then the official CLI validates the manifest and packs
the directory (Node.js: npx). Run it with the project's venv: it builds the wheel with this
interpreter's pip and imports the server to list its tools.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Pinned: `npx -y` of a bare name runs whatever was published last.
MCPB_CLI = "@anthropic-ai/mcpb@2.1.2"
# What goes into the bundle besides the manifest and the wheel, as it is in this directory.
BUNDLED = ["pyproject.toml", ".python-version", "server/main.py"]


def build_wheel(dest: Path) -> Path:
    """corrigenda's wheel, built by pip in isolation from a copy of the sources, so that the work
    tree gets no build/ or egg-info and two builds can run at once."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp)
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(ROOT / name, source / name)
        for package in ("store", "server"):
            shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), str(source)], check=True
        )
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    return dest / f"corrigenda-{version}-py3-none-any.whl"


def tool_list() -> list[dict[str, str]]:
    """Each registered tool with the first paragraph of its description, as the server lists them."""
    import anyio
    from corrigenda.server.app import build_server
    from corrigenda.server.config import Settings

    with tempfile.TemporaryDirectory() as db:  # listing tools opens no store
        tools = anyio.run(build_server(Settings(db=db)).list_tools)
    return [{"name": t.name, "description": " ".join((t.description or "").split("\n\n")[0].split())} for t in tools]


def stage(directory: Path) -> Path:
    """Lay out the bundle's files in an empty directory."""
    for name in BUNDLED:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(HERE / name, directory / name)
    wheel = build_wheel(directory / "wheels")
    bundle_project: dict[str, Any] = tomllib.loads((directory / "pyproject.toml").read_text(encoding="utf-8"))
    named = Path(directory, bundle_project["tool"]["uv"]["sources"]["corrigenda"]["path"])
    if named != wheel or not wheel.is_file():
        raise SystemExit(f"the bundle's pyproject.toml names {named.name}, but the wheel built is {wheel.name}")
    manifest = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
    manifest["tools"] = tool_list()
    (directory / "manifest.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return directory


def mcpb(*args: str, cwd: Path) -> None:
    """Run the official MCPB CLI in the bundle's directory; its output goes to ours."""
    npx = shutil.which("npx")
    if npx is None:
        raise SystemExit("npx not found: validating and packing need Node.js")
    subprocess.run([npx, "-y", MCPB_CLI, *args], check=True, cwd=cwd)


def build(out: Path) -> Path:
    """Stage, validate and pack; return the .mcpb file."""
    version = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))["version"]
    bundle = out / f"corrigenda-{version}.mcpb"
    with tempfile.TemporaryDirectory() as tmp:
        directory = stage(Path(tmp) / "corrigenda")
        mcpb("validate", "manifest.json", cwd=directory)
        out.mkdir(parents=True, exist_ok=True)
        mcpb("pack", ".", str(bundle), cwd=directory)
    return bundle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the .mcpb goes (default: dist/)")
    bundle = build(parser.parse_args().out.resolve())
    print(f"{bundle} ({bundle.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
