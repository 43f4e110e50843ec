#!/bin/sh
# Register corrigenda with Claude Code as a stdio server for all your projects (--scope user).
# `corrigenda` must be on PATH; otherwise put the absolute path of the venv's script after `--`.
#
# Claude Code's docs: every option goes before the server name, and `--` separates the name
# from the command that starts the server. `--env` takes several values, so it is followed by
# another option, never directly by the name: `-e KEY=VALUE corrigenda -- ...` would read the
# name as a second variable (anthropics/claude-code#23365, #62332).
set -eu

claude mcp add --transport stdio --env CORRIGENDA_SCOPE=default --scope user corrigenda -- corrigenda serve

# Over HTTP instead: start `corrigenda serve --transport http --port 8765` yourself, then
#   claude mcp add --transport http --scope user corrigenda http://127.0.0.1:8765/mcp
