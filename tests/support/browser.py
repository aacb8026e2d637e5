"""Debian's headless chromium, driven through chromedriver's W3C WebDriver HTTP API with httpx (no
browser library needed): open a page, run JavaScript, click, type, choose, take a screenshot.

    with Browser(tmp_path) as browser:
        browser.open(path)
        browser.click("#f-reset")
        browser.screenshot(tmp_path / "page.png")

`chromium_or_skip()` finds the two programs, or skips with what to install (fails instead when
FLEXSQL_TEST_REQUIRE_CHROMIUM=1, as in CI)."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

# a fresh profile, nothing in the background that could reach the network
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
]
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference


def chromium_or_skip() -> tuple[str, str]:
    """(chromium, chromedriver) paths."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium and driver:
        return chromium, driver
    reason = (
        "Debian's chromium and chromium-driver are not installed (apt-get install -y chromium "
        "chromium-driver; .ci/run installs them)"
    )
    if os.environ.get("FLEXSQL_TEST_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason + " and FLEXSQL_TEST_REQUIRE_CHROMIUM=1 forbids skipping")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    def __init__(self, profile_dir: Path, timeout_s: float = 60.0) -> None:
        self.chromium, driver = chromium_or_skip()
        self.profile = Path(profile_dir) / "chromium-profile"
        self.profile.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        self.log = open(Path(profile_dir) / "chromedriver.log", "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [driver, f"--port={port}"], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.base = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(timeout=timeout_s)
        self.session = ""
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.http.get(f"{self.base}/status").json()["value"]["ready"]:
                    break
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError(f"chromedriver did not start; see {self.log.name}")
            time.sleep(0.1)
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": self.chromium,
                        "args": [*CHROMIUM_ARGS, f"--user-data-dir={self.profile}"],
                    },
                }
            }
        }
        self.session = self._request("POST", "/session", caps)["sessionId"]

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        payload = body if body is not None else ({} if method == "POST" else None)
        response = self.http.request(method, self.base + path, json=payload)
        value = response.json().get("value")
        if response.status_code >= 400:
            message = value.get("message") if isinstance(value, dict) else value
            raise RuntimeError(f"WebDriver {method} {path}: {message}")
        return value

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """A command of this browser's session."""
        return self._request(method, f"/session/{self.session}{path}", body)

    def open(self, path: Path | str) -> None:
        url = path if isinstance(path, str) and "://" in path else Path(path).resolve().as_uri()
        self._call("POST", "/url", {"url": url})

    def js(self, script: str, *args: Any) -> Any:
        """Run `script` (a function body: `return …`) in the page."""
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css: str) -> str:
        return str(self._call("POST", "/element", {"using": "css selector", "value": css})[ELEMENT])

    def click(self, css: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/click")

    def type(self, css: str, text: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/value", {"text": text})

    def choose(self, select_css: str, value: str) -> None:
        """Pick an option of a <select> the way a user does: click it, click the option."""
        self.click(select_css)
        self.click(f'{select_css} option[value="{value}"]')

    def wait_for(self, script: str, timeout_s: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.js(script)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never satisfied: {script}")
            time.sleep(0.05)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        if full_page:  # the window as tall as the page, so the file shows all of it
            height = int(self.js("return Math.min(document.documentElement.scrollHeight, 16000)"))
            self._call("POST", "/window/rect", {"width": 1400, "height": max(1000, height)})
        data = self._call("GET", "/screenshot")
        path.write_bytes(base64.b64decode(data))
        return path

    def console_errors(self) -> list[str]:
        """Uncaught errors the page met (the explorer records them in window.__errors)."""
        return list(self.js("return window.__errors || []"))

    def close(self) -> None:
        if self.session:
            try:
                self._call("DELETE", "")
            except Exception:  # the browser may be gone already; the driver is stopped below
                pass
            self.session = ""
        self.http.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
