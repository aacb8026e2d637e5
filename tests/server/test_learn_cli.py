"""`flexsql learn` and the recall / remember tools through the real interfaces: the command line in a
subprocess (`flexsql learn FILE --db URL`, `flexsql call --db URL --json recall …`) and an MCP client over
stdio. The subprocesses use the real sentence-embedding model (recall by meaning)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.support.mcp_support import server_env, stdio_params, text_of
from tests.tools.knowledge.conftest import make_music

pytestmark = pytest.mark.integration

PAIRS = [
    (
        "Concerts held at each venue",
        "SELECT v.location, count(*) FROM concert c JOIN venue v ON c.venue_code = v.code GROUP BY v.location",
    ),
    ("How many singers are there?", "SELECT count(*) FROM singer"),
    ("Which venue is the largest?", "SELECT location FROM venue ORDER BY capacity DESC LIMIT 1"),
    ("List every concert name", "SELECT concert_name FROM concert"),
]


def flexsql(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "flexsql.server", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=server_env(env),
    )


@pytest.fixture
def learned(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A music database, its store in the test's folder, the pairs imported with `flexsql learn`."""
    url = make_music(tmp_path / "music.sqlite")
    env = {"FLEXSQL_DATA_DIR": str(tmp_path / "data")}
    file = tmp_path / "verified.jsonl"
    file.write_text("".join(json.dumps({"question": q, "sql": s}) + "\n" for q, s in PAIRS))
    done = flexsql("learn", str(file), "--db", url, "--verified-by", "ana", env=env)
    assert done.returncode == 0, done.stderr
    assert "4 added" in done.stdout and str(tmp_path / "data" / "knowledge") in done.stdout
    return url, env


def test_learn_then_recall_by_meaning_through_the_command_line(learned: tuple[str, dict[str, str]]) -> None:
    url, env = learned
    # no word in common with the stored question: only meaning finds it
    question = "Count the vocalists"
    done = flexsql("call", "--db", url, "--json", "recall", f"question={question}", "limit=3", env=env)
    assert done.returncode == 0, done.stderr
    queries = json.loads(done.stdout)["queries"]
    assert [set(q) >= {"question", "sql"} for q in queries] == [True, True, True]
    assert queries[0]["question"] == "How many singers are there?"
    assert queries[0]["sql"] == "SELECT count(*) FROM singer" and queries[0]["verified_by"] == "ana"
    # the control: without the model, words alone do not find it
    off = flexsql(
        "call",
        "--db",
        url,
        "--json",
        "recall",
        f"question={question}",
        "limit=1",
        env={**env, "FLEXSQL_EMBEDDINGS": "off"},
    )
    assert json.loads(off.stdout)["queries"][0]["question"] != "How many singers are there?"


def test_learn_is_idempotent_and_reports_bad_input(
    learned: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, env = learned
    store = next((tmp_path / "data" / "knowledge").iterdir())
    before = (store / "queries.yaml").read_bytes()
    again = flexsql("learn", str(tmp_path / "verified.jsonl"), "--db", url, "--json", env=env)
    report = json.loads(again.stdout)["reports"][0]
    assert (report["added"], report["known"], report["written"]) == (0, 4, [])
    assert (store / "queries.yaml").read_bytes() == before

    bad = tmp_path / "broken.json"
    bad.write_text('[{"question": "x", "query": "SELECT 1"')
    done = flexsql("learn", str(bad), "--db", url, env=env)
    assert (
        done.returncode == 2
        and "broken.json is not valid JSON" in done.stderr
        and "nothing was imported" in done.stderr
    )
    assert (store / "queries.yaml").read_bytes() == before

    history = flexsql("learn", "--history", "--db", url, env=env)
    assert history.returncode == 1 and "sqlite keeps no query history" in history.stderr
    assert flexsql("learn", "--db", url, env=env).returncode == 2


@pytest.mark.anyio
async def test_remember_and_recall_over_mcp(tmp_path: Path) -> None:
    url = make_music(tmp_path / "music.sqlite")
    params = stdio_params(url, env={"FLEXSQL_DATA_DIR": str(tmp_path / "data"), "FLEXSQL_EMBEDDINGS": "off"})
    async with Client(params) as client:
        failed = await client.call_tool(
            "remember", {"question": "Oldest singer", "sql": "SELECT nme FROM singer"}
        )
        assert failed.is_error and "remember refused: the SQL failed when run" in text_of(failed)
        assert not (tmp_path / "data" / "knowledge").exists()
        stored = await client.call_tool(
            "remember",
            {"question": "Oldest singer", "sql": "SELECT name FROM singer ORDER BY age DESC LIMIT 1"},
        )
        assert not stored.is_error and stored.structured_content["result_columns"] == ["name"]
        found = await client.call_tool("recall", {"question": "oldest singer", "limit": 3})
        queries = found.structured_content["queries"]
        assert queries[0]["question"] == "Oldest singer"
        assert "ORDER BY age DESC" in queries[0]["sql"] and "ORDER BY age DESC" in text_of(found)


def test_the_configured_folder_is_used_for_the_source_and_for_a_matching_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from flexsql.server.cli import main

    url = make_music(tmp_path / "music.sqlite")
    folder = tmp_path / "repo" / "knowledge" / "music"
    config = tmp_path / "flexsql.toml"
    config.write_text(f'[[sources]]\nname = "music"\nurl = "{url}"\nknowledge = "{folder}"\n')
    file = tmp_path / "pairs.jsonl"
    file.write_text(
        json.dumps({"question": "How many singers?", "sql": "SELECT count(*) FROM singer"}) + "\n"
    )
    monkeypatch.setenv("FLEXSQL_DATA_DIR", str(tmp_path / "elsewhere"))
    done = CliRunner().invoke(main, ["learn", str(file), "--config", str(config)])
    assert done.exit_code == 0, done.output
    assert str(folder) in done.output and (folder / "queries.yaml").exists()
    # the same URL given with --db finds the configured folder, and so does recall
    again = CliRunner().invoke(main, ["learn", str(file), "--config", str(config), "--db", url, "--json"])
    assert json.loads(again.output)["reports"][0]["known"] == 1
    found = CliRunner().invoke(
        main, ["call", "recall", "question=How many singers?", "--config", str(config), "--json"]
    )
    assert json.loads(found.output)["queries"][0]["sql"] == "SELECT count(*) FROM singer"
    assert not (tmp_path / "elsewhere").exists()
