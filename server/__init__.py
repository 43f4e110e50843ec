"""corrigenda's MCP surface and command line: thin over corrigenda.store."""
