"""Evaluate JavaScript in a page opened by headless Chromium, over the DevTools protocol.

The report forbids scripts (its Content-Security-Policy), so measurements cannot be a script in
the page; DevTools' Runtime.evaluate is not subject to the page's CSP, so the file under test is
the exact file the user gets. aiohttp (already a dependency) speaks the websocket.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

CHROMIUM = Path("/usr/bin/chromium")
HOW = "install chromium: bash scripts/ensure-chromium.sh"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-port=0", "--remote-allow-origins=*"]
# Runs after the load event and once fonts are ready, so the layout is the final one.
LOADED = ("new Promise(r => { const go = () => document.fonts.ready.then(r); "
          "document.readyState === 'complete' ? go() : addEventListener('load', go); })")


def require_chromium() -> Path:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing; {HOW}", pytrace=False)
    return CHROMIUM


def _devtools_port(profile: Path, proc: subprocess.Popen, deadline: float) -> int:
    """Chromium writes the port it picked into the profile once DevTools listens."""
    marker = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"chromium exited with {proc.returncode} before DevTools opened")
        lines = marker.read_text().splitlines() if marker.exists() else []
        if lines and lines[0].isdigit():
            return int(lines[0])
        time.sleep(0.05)
    raise AssertionError("chromium did not open DevTools within the deadline")


async def _page_target(session: aiohttp.ClientSession, port: int) -> dict:
    while True:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json(content_type=None)
        for target in targets:
            if target["type"] == "page":
                return target
        await asyncio.sleep(0.05)


async def _reply(ws: aiohttp.ClientWebSocketResponse, wanted: str | int, timeout: float) -> dict:
    """The next message answering request id `wanted`, or the next event named `wanted`."""
    while True:
        msg = json.loads((await ws.receive(timeout=timeout)).data)
        if msg.get("id") == wanted or msg.get("method") == wanted:
            if "error" in msg or "exceptionDetails" in msg.get("result", {}):
                raise AssertionError(f"DevTools call failed: {json.dumps(msg)[:2000]}")
            return msg


async def _call(port: int, url: str, expression: str, timeout: float) -> Any:
    """Navigate the blank tab ourselves, so the evaluation cannot land on about:blank."""
    async with aiohttp.ClientSession() as session:
        page = await _page_target(session, port)
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            await ws.send_json({"id": 1, "method": "Page.enable"})
            await _reply(ws, 1, timeout)
            await ws.send_json({"id": 2, "method": "Page.navigate", "params": {"url": url}})
            await _reply(ws, "Page.loadEventFired", timeout)
            await ws.send_json({"id": 3, "method": "Runtime.evaluate", "params": {
                "expression": f"{LOADED}.then(() => ({expression}))",
                "awaitPromise": True, "returnByValue": True}})
            msg = await _reply(ws, 3, timeout)
    return msg["result"]["result"].get("value")


def evaluate(page: Path, expression: str, profile: Path, *, width: int = 1280,
             timeout: float = 60.0) -> Any:
    """Open `page` in a fresh profile at `width` px and return the JSON value of `expression`."""
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "DevToolsActivePort").unlink(missing_ok=True)  # a previous browser's port
    proc = subprocess.Popen([str(require_chromium()), *FLAGS, f"--user-data-dir={profile}",
                             f"--window-size={width},900", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = _devtools_port(profile, proc, time.monotonic() + timeout)
        call = _call(port, page.as_uri(), expression, timeout)
        return asyncio.run(asyncio.wait_for(call, timeout))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
