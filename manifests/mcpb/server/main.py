"""Entry point that `mcpb pack` requires to exist. Claude Desktop does not run this file: it runs
`mcp_config.command` (the installed `corrigenda` script). Running it by hand does the same thing."""

import sys

from corrigenda.server.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
