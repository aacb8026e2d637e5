"""Small leaks (issue 30, item 14), each decided and held:

- `ask` over HTTP names its trace by file name only — the folder is the server's (its user's cache,
  which shows the home folder and user name); the local client (stdio) keeps the whole path;
- GET /healthz without the bearer token answers `{"status": "ok"}` and nothing else (a load
  balancer's check needs no more); with the token, or on a server without one, the whole body;
- the model client does not follow a redirect: it would POST the whole prompt, and the key, to an
  address no one configured; the run fails saying where base_url should point.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.support.agent_support import Shop, StageScript, build_shop
from tests.support.mcp_support import http_client, http_server, server_env, stdio_params, text_of
from tests.support.openai_stub import Fail, OpenAIStub

pytestmark = pytest.mark.integration

TOKEN = "tok-" + "h5" * 14
COUNT = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"})
QUIET = {"FLEXSQL_AGENT__PLANS": "1", "FLEXSQL_AGENT__EVALUATE": "false", "FLEXSQL_MODEL__MAX_RETRIES": "0"}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    built = build_shop(tmp_path_factory.mktemp("shop"))
    yield built
    built.close()


def model_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "flexsql.toml"
    path.write_text(
        f'[model]\nbase_url = "{base_url}"\nmodel = "stub"\nmax_retries = 0\n\n[agent]\nplans = 1\nevaluate = false\n'
    )
    return path


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-stateless", "2025-session"])
async def test_ask_over_http_names_its_trace_without_the_servers_folders(
    shop: Shop, tmp_path: Path, mode: str
) -> None:
    with OpenAIStub(COUNT) as stub:
        config = model_config(tmp_path, stub.base_url)
        with http_server(shop.url, extra_args=["--config", str(config)]) as (url, _proc):
            async with http_client(url, mode=mode) as client:
                result = await client.call_tool("ask", {"question": "How many orders are there?"})
    out = result.structured_content
    assert out["status"] == "answered", text_of(result)
    assert out["trace"] == f"{out['run_id']}.jsonl", out["trace"]  # the file name, no folder
    cache = server_env()["FLEXSQL_CACHE_DIR"]
    assert cache not in text_of(result) and "/" not in out["trace"]


@pytest.mark.anyio
async def test_ask_over_stdio_keeps_the_whole_trace_path_for_the_local_user(shop: Shop) -> None:
    with OpenAIStub(COUNT) as stub:
        env = {"FLEXSQL_MODEL__BASE_URL": stub.base_url, "FLEXSQL_MODEL__MODEL": "stub", **QUIET}
        async with Client(stdio_params(shop.url, env=env)) as client:
            result = await client.call_tool("ask", {"question": "How many orders are there?"})
    trace = Path(result.structured_content["trace"])
    assert trace.is_absolute() and trace.exists(), trace


def health(url: str, token: str | None = None) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(url.replace("/mcp", "/healthz"), headers=headers, timeout=30)
    assert response.status_code == 200
    return response.json()


def test_healthz_shows_load_and_memory_only_to_a_client_with_the_token(tmp_path: Path) -> None:
    from tests.support.engines import make_duckdb

    with http_server(make_duckdb(tmp_path), token=TOKEN) as (url, _proc):
        assert health(url) == {"status": "ok"}
        assert health(url, "wrong-" + TOKEN) == {"status": "ok"}
        full = health(url, TOKEN)
    assert full["status"] == "ok" and full["calls_in_flight"] == 0 and full["sources"] == 1
    assert isinstance(full["memory"], dict) and full["memory"]["rss_mb"] > 0


def test_healthz_of_a_server_without_a_token_shows_everything(tmp_path: Path) -> None:
    from tests.support.engines import make_duckdb

    with http_server(make_duckdb(tmp_path)) as (url, _proc):
        body = health(url)
    assert {"status", "version", "sources", "calls_in_flight", "memory"} <= set(body), body


def test_the_model_client_does_not_follow_a_redirect_with_the_prompt(shop: Shop) -> None:
    """The configured endpoint answers 307 to another endpoint: that one never sees the prompt, and
    `flexsql ask` fails saying the endpoint redirected, and where."""
    with OpenAIStub(COUNT) as elsewhere:
        target = f"{elsewhere.base_url}/chat/completions"
        with OpenAIStub(lambda req: Fail(status=307, headers={"Location": target}, message="moved")) as moved:
            done = subprocess.run(
                [sys.executable, "-P", "-m", "flexsql.server", "ask", "How many orders are there?"]
                + ["--db", shop.url, "--base-url", moved.base_url, "--model", "stub"],
                capture_output=True,
                text=True,
                env=server_env(QUIET),
                timeout=120,
            )
            asked = len(moved.requests)
        received = len(elsewhere.requests)
    assert asked >= 1  # positive control: the configured endpoint was asked
    assert received == 0, "the prompt was re-sent to the address the redirect named"
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "redirect" in done.stdout and elsewhere.base_url in done.stdout, done.stdout
