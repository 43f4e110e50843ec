#!/bin/sh
# Register corrigenda with Claude Code as a stdio server for all your projects (--scope user).
# No CORRIGENDA_SCOPE: each session's scope comes from the project Claude Code offers as its root
# (README, "Scopes"). To pin one, add `--env CORRIGENDA_SCOPE=name` before `--scope`.
# `corrigenda` must be on PATH; otherwise put the absolute path of the venv's script after `--`.
#
# Claude Code's docs: every option goes before the server name, and `--` separates the name
# from the command that starts the server. `--env` takes several values, so it is followed by
# another option, never directly by the name: `-e KEY=VALUE corrigenda -- ...` would read the
# name as a second variable (anthropics/claude-code#23365, #62332).
set -eu

claude mcp add --transport stdio --scope user corrigenda -- corrigenda serve

# Over HTTP instead: start `corrigenda serve --transport http --port 8765` yourself, then
#   claude mcp add --transport http --scope user corrigenda http://127.0.0.1:8765/mcp
