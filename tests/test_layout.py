"""The shape the house style asks for: `store/` is the engine and knows no MCP; `server/` is the adapter."""

from __future__ import annotations

import json
import subprocess
import sys

# Imports the store and every module in it, in a fresh interpreter, and lists the MCP modules loaded.
IMPORT_THE_STORE = """
import importlib, json, pkgutil, sys
import corrigenda.store
for module in pkgutil.iter_modules(corrigenda.store.__path__, "corrigenda.store."):
    importlib.import_module(module.name)
print(json.dumps(sorted(name for name in sys.modules if name.startswith("mcp"))))
"""


def test_importing_the_store_imports_no_mcp() -> None:
    out = subprocess.run([sys.executable, "-c", IMPORT_THE_STORE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == []
