"""Makes the README's pictures of the web view, in headless Chromium, from a store seeded as the
browser tests seed theirs (tests/server/test_ui.py); tests/server/test_ui.py runs it, so CI does.

.venv/bin/python docs/make_screenshots.py [--out DIR]     (default: docs/)

- ui-landing.png: the landing page of a scope;
- ui-correct.png: a person correcting a note by hand, the form filled in;
- ui-chain.png: the chain after that correction, with its timeline;
- mcp-app.png: the MCP App showing a `recall_chains` result inside a host (the test host of
  tests/server/test_mcp_app.py, written to the extension's specification);
- mcp-app-outdated.png: the MCP App, in a host that passes its tool calls on, asking the person about a
  chain marked POSSIBLY OUTDATED: a reason typed, the two answers as buttons.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio  # noqa: E402
from corrigenda.server.app import build_server  # noqa: E402
from corrigenda.server.config import Settings  # noqa: E402
from corrigenda.store import Memory  # noqa: E402
from mcp import Client  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.server.test_mcp_app import show_in_a_host  # noqa: E402
from tests.server.test_ui import CHROMIUM, CHROMIUM_ARGS, free_port, seed, start  # noqa: E402

WIDTH = 1000
PICTURES = ("ui-landing.png", "ui-correct.png", "ui-chain.png", "mcp-app.png", "mcp-app-outdated.png")
QUESTION = "which port does the payments service use?"
TIMEOUTS = (  # two values of one subject, nothing linking them: recall marks the older POSSIBLY OUTDATED
    "The payments service times out after 30 seconds",
    "The payments service times out after 45 seconds",
)


def main(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "store")
        ids = seed(Memory(db))
        port = free_port()
        arguments = ["ui", "--db", db, "--scope", "ops", "--port", str(port)]
        for base, _ in start(arguments, port, env={"CORRIGENDA_PERSON": "Ada"}):
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": WIDTH, "height": 640})
                page.goto(f"{base}/")
                page.screenshot(path=str(out / PICTURES[0]), full_page=True)

                page.goto(f"{base}/chain/{ids['new']}")
                head = page.locator("li.now").first
                head.locator("summary", has_text="Correct").click()
                head.locator("textarea[name=text]").fill("The payments service listens on port 9443")
                head.locator("details[open] input[name=reason]").fill("moved to TLS on 1 December")
                page.screenshot(path=str(out / PICTURES[1]))
                head.locator("details[open] button").click()
                page.click("button.go")
                page.locator(".notice").wait_for()
                page.screenshot(path=str(out / PICTURES[2]), full_page=True)
                browser.close()
        anyio.run(app_picture, db, out / PICTURES[3])
        anyio.run(app_outdated_picture, db, out / PICTURES[4])
    return [out / name for name in PICTURES]


async def app_picture(db: str, picture: Path) -> None:
    """The MCP App, in a host, showing what `recall_chains` answers over MCP after the correction."""
    server = build_server(Settings(db=db))
    async with Client(server, raise_exceptions=True) as client:

        async def drawn(frame: object) -> None:
            await frame.locator(".chain").first.wait_for()  # type: ignore[attr-defined]

        await show_in_a_host(client, "recall_chains", {"query": QUESTION, "scope": "ops"}, drawn, str(picture))


async def app_outdated_picture(db: str, picture: Path) -> None:
    """The MCP App asking about a POSSIBLY OUTDATED mark, the person's reason typed in (scope `timeouts`)."""
    server = build_server(Settings(db=db))
    async with Client(server, raise_exceptions=True) as client:
        for text in TIMEOUTS:
            arguments = {"text": text, "subject": "payments.timeout", "scope": "timeouts"}
            await client.call_tool("remember", arguments)

        async def asked(frame: object) -> None:
            mark = frame.locator(".suspect")  # type: ignore[attr-defined]
            await mark.locator("input.reason").fill("the gateway's config says 45 s since Monday")
            await mark.locator("button", has_text="replaces it").hover()

        question = "how long before the payments service times out?"
        arguments = {"query": question, "scope": "timeouts"}
        await show_in_a_host(client, "recall_chains", arguments, asked, str(picture), calls_tools=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the pictures go (default: docs/)")
    for made in main(parser.parse_args().out):
        print(made)
