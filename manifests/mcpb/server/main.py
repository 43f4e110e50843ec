"""The bundle's entry point: `corrigenda serve` on stdio, run by Claude Desktop as the manifest's
mcp_config says (`uv run --directory <bundle> server/main.py`, in the environment uv installed from
the bundle's pyproject.toml). Settings come from CORRIGENDA_* variables; extra arguments go to
`serve`."""

import sys

from corrigenda.server.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
