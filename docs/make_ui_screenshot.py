"""Regenerates docs/ui.png: the web view of tests/test_ui.py's store, searched, in headless Chromium.

.venv/bin/python docs/make_ui_screenshot.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from corrigenda.store import Memory  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.test_ui import CHROMIUM, CHROMIUM_ARGS, free_port, seed, start_ui  # noqa: E402


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "store")
        seed(Memory(db))
        for base in start_ui(db, free_port()):
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1000, "height": 430})
                page.goto(f"{base}/?scope=ops&q=which+port+does+the+payments+service+use%3F")
                page.locator("section.chain").first.wait_for()
                page.screenshot(path=str(out))
                browser.close()


if __name__ == "__main__":
    main(ROOT / "docs" / "ui.png")
