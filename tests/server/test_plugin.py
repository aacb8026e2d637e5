"""The Claude Code plugin, the skills, `flexsql install-skills` and `flexsql mcp-config`.

The Claude Code CLI tests need `claude` on PATH (npm package @anthropic-ai/claude-code; CI installs
it when npm is available) and skip with that reason otherwise. They run offline in a temporary HOME.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from flexsql import __version__
from flexsql.server.plugin_cli import install_skills_command, mcp_config_command
from tests.support.engines import make_duckdb
from tests.support.paths import ROOT

SKILLS = sorted(p.parent.name for p in (ROOT / "skills").glob("*/SKILL.md"))
DOCS = [
    *sorted((ROOT / "prompts").glob("*.md")),
    *sorted((ROOT / "skills").glob("*/SKILL.md")),
    *sorted((ROOT / "commands").glob("*.md")),
]

# How prompts, skills and commands name tools: mcp__plugin_flexsql_flexsql__X (plugin install),
# mcp__flexsql__X (`claude mcp add flexsql`), and `X(…)` in inline code. SQL in inline code is
# written in upper case (`COUNT(*)`), so a lower-case call in backticks is always a tool.
TOOL_FORMS = [
    re.compile(r"mcp__plugin_flexsql_flexsql__([a-z_]+)"),
    re.compile(r"mcp__flexsql__([a-z_]+)"),
    re.compile(r"`([a-z][a-z0-9_]*)\("),
]


def tool_mentions(text: str) -> set[str]:
    return {m for form in TOOL_FORMS for m in form.findall(text)}


def front_matter(path: Path) -> tuple[dict[str, str], str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), f"{path} has no front matter"
    head, body = text[4:].split("\n---\n", 1)
    fields = {}
    for line in head.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields, body


def allowed_tools(fields: dict[str, str]) -> list[str]:
    return [t.strip() for t in fields.get("allowed-tools", "").split(",") if t.strip()]


@pytest.fixture(scope="module")
def server_tools(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The tool names of a real server, listed over MCP: the server is the source of truth."""
    import anyio

    from flexsql.config import Settings
    from flexsql.server.app import build_server
    from flexsql.tools.engines import SourceRegistry, open_source

    source = open_source(make_duckdb(tmp_path_factory.mktemp("tools")), name="shop")
    server = build_server(Settings(), SourceRegistry([source]), allow_python=True)

    async def names() -> set[str]:
        async with Client(server) as client:
            return {t.name for t in (await client.list_tools()).tools}

    try:
        return anyio.run(names)
    finally:
        source.close()


def test_tool_mentions_are_found_in_every_form() -> None:
    text = "Use `run_query(sql)`, `COUNT(*)`, mcp__flexsql__find_values and mcp__plugin_flexsql_flexsql__sample_rows."
    assert tool_mentions(text) == {"run_query", "find_values", "sample_rows"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_tool_named_in_prompts_skills_and_commands_exists(doc: Path, server_tools: set[str]) -> None:
    mentioned = tool_mentions(doc.read_text(encoding="utf-8"))
    assert mentioned, f"{doc.name} names no tool; write tool calls as `tool_name(args)`"
    unknown = mentioned - server_tools
    assert not unknown, (
        f"{doc.relative_to(ROOT)} names tools the server does not have: {sorted(unknown)}; "
        f"server tools: {sorted(server_tools)}"
    )


@pytest.mark.parametrize("name", SKILLS)
def test_skill_front_matter(name: str) -> None:
    fields, body = front_matter(ROOT / "skills" / name / "SKILL.md")
    assert fields["name"] == name
    assert "Use " in fields["description"] or "Use when" in fields["description"]
    tools = allowed_tools(fields)
    assert tools and all(t.startswith("mcp__plugin_flexsql_flexsql__") for t in tools), tools
    # a tool the body tells the model to call but allowed-tools omits costs a permission prompt each time
    granted = {t.rsplit("__", 1)[1] for t in tools}
    assert tool_mentions(body) <= granted, sorted(tool_mentions(body) - granted)
    assert "Worked example (demo database)" in body


def test_at_least_the_three_flexsql_skills_ship() -> None:
    assert {"flexsql-explore", "flexsql-solve", "flexsql-verify"} <= set(SKILLS)


def test_manifests_agree_with_each_other_and_the_package() -> None:
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert plugin["name"] == "flexsql" and plugin["version"] == __version__
    [entry] = market["plugins"]
    assert entry["name"] == plugin["name"] and entry["version"] == plugin["version"]
    assert (ROOT / entry["source"] / ".claude-plugin" / "plugin.json").is_file()


def test_plugin_server_entry_runs_the_plugins_own_checkout() -> None:
    # flexsql is not on PyPI yet: `uvx flexsql serve` would fail for every user; the plugin builds itself
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert plugin["mcpServers"] == {
        "flexsql": {"command": "uvx", "args": ["--from", "${CLAUDE_PLUGIN_ROOT}", "flexsql", "serve"]}
    }
    # `claude` run in the checkout reads the root .mcp.json as the project's: CLAUDE_PLUGIN_ROOT is unset
    # there (Claude Code passes "${CLAUDE_PLUGIN_ROOT}" through as text), and project servers start in
    # the project folder, the checkout
    project = json.loads((ROOT / ".mcp.json").read_text())["mcpServers"]
    assert project == {"flexsql": {"command": "uvx", "args": ["--from", ".", "flexsql", "serve"]}}


# -- flexsql install-skills --------------------------------------------------------------------


def test_install_skills_project_then_rerun_then_refuse_then_force(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    first = runner.invoke(install_skills_command, ["--project"])
    assert first.exit_code == 0, first.output
    target = tmp_path / ".claude" / "skills"
    assert sorted(p.name for p in target.iterdir()) == SKILLS
    solve = target / "flexsql-solve" / "SKILL.md"
    assert f"wrote      {solve}" in first.output
    installed_tools = allowed_tools(front_matter(solve)[0])
    # without the plugin the tools are named after `claude mcp add flexsql`
    assert installed_tools and all(t.startswith("mcp__flexsql__") for t in installed_tools)
    assert "claude mcp add flexsql -- " in first.output

    again = runner.invoke(install_skills_command, [])
    assert again.exit_code == 0 and f"unchanged  {solve}" in again.output

    solve.write_text(solve.read_text() + "\nmy own note\n")
    refused = runner.invoke(install_skills_command, [])
    assert refused.exit_code == 1
    assert (
        str(solve) in refused.output
        and "--force" in refused.output
        and "Nothing was written" in refused.output
    )
    assert solve.read_text().endswith("my own note\n")

    forced = runner.invoke(install_skills_command, ["--force"])
    assert forced.exit_code == 0 and f"replaced   {solve}" in forced.output
    assert "my own note" not in solve.read_text()


def test_install_skills_user_scope_with_another_server_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(install_skills_command, ["--user", "--server-name", "warehouse"])
    assert result.exit_code == 0, result.output
    skill = tmp_path / "home" / ".claude" / "skills" / "flexsql-explore" / "SKILL.md"
    assert all(t.startswith("mcp__warehouse__") for t in allowed_tools(front_matter(skill)[0]))
    assert not (tmp_path / ".claude").exists()


# -- flexsql mcp-config --------------------------------------------------------------------------


def config_output(*args: str) -> str:
    result = CliRunner().invoke(mcp_config_command, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout  # which sources it serves goes to stderr


UVX = shutil.which("uvx")


def test_mcp_config_claude_line_puts_the_name_before_the_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shop.duckdb").write_bytes(b"")  # mcp-config refuses a file that does not exist
    line = config_output(
        "--client", "claude", "--db", "duckdb:///./shop.duckdb", "--launcher", "flexsql"
    ).strip()
    assert shlex.split(line) == [
        "claude",
        "mcp",
        "add",
        "flexsql",
        "--",
        "flexsql",
        "serve",
        "--db",
        f"duckdb://{tmp_path / 'shop.duckdb'}",
    ]
    scoped = config_output("--client", "claude", "--scope", "user", "--launcher", "uvx", "--name", "db")
    assert shlex.split(scoped) == [
        "claude",
        "mcp",
        "add",
        "--scope",
        "user",
        "db",
        "--",
        str(Path(UVX).resolve()),  # by absolute path: desktop clients do not read the shell's PATH
        "--from",
        str(ROOT),
        "flexsql",
        "serve",
    ]  # flexsql is not on PyPI: `uvx flexsql serve` would fail; uvx builds this checkout


def test_mcp_config_json_snippets_for_each_client() -> None:
    out = config_output("--launcher", "uvx", "--db", "pg=postgresql://me@localhost/shop")
    sections = out.strip().split("\n\n# ")
    assert len(sections) == 4
    snippets = {
        s.split("\n", 1)[0].lstrip("# ").split(":")[0].split(" (")[0]: s.split("\n", 1)[1] for s in sections
    }
    argv = ["--from", str(ROOT), "flexsql", "serve", "--db", "pg=postgresql://me@localhost/shop"]
    uvx = str(Path(UVX).resolve())
    for client in ("Cursor", "Claude Desktop"):
        assert json.loads(snippets[client]) == {"mcpServers": {"flexsql": {"command": uvx, "args": argv}}}
    assert json.loads(snippets["VS Code"]) == {
        "servers": {"flexsql": {"type": "stdio", "command": uvx, "args": argv}}
    }
    assert shlex.split(snippets["Claude Code"])[:5] == ["claude", "mcp", "add", "flexsql", "--"]


def test_mcp_config_warns_when_a_url_carries_a_password() -> None:
    result = CliRunner().invoke(mcp_config_command, ["--client", "cursor", "--db", "postgresql://me:pw@h/db"])
    assert result.exit_code == 0 and "contains a password" in result.output


@pytest.mark.integration
@pytest.mark.anyio
async def test_mcp_config_snippet_starts_a_working_server(tmp_path: Path) -> None:
    """The printed JSON is what a client runs: start exactly that and talk MCP to it."""
    url = make_duckdb(tmp_path)
    snippet = json.loads(config_output("--client", "cursor", "--db", url))["mcpServers"]["flexsql"]
    params = StdioServerParameters(command=snippet["command"], args=snippet["args"], env=dict(os.environ))
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("list_tables", {})
    assert {"run_query", "describe_table"} <= tools
    assert "orders" in result.content[0].text


# -- Claude Code itself ----------------------------------------------------------------------------

CLAUDE = shutil.which("claude")
needs_claude = pytest.mark.skipif(
    CLAUDE is None, reason="Claude Code CLI not on PATH (npm install -g @anthropic-ai/claude-code)"
)


def claude(
    *args: str, home: Path, cwd: Path, path: str | None = None, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(home),
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **(extra or {}),
    }
    if path is not None:
        env["PATH"] = path
    return subprocess.run([CLAUDE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def mcp_logs(home: Path) -> str:
    logs = sorted((home / ".cache").rglob("*.jsonl")) + sorted((home / ".cache").rglob("*.txt"))
    return "\n".join(p.read_text(errors="replace")[-2000:] for p in logs[-3:])


@pytest.mark.integration
@needs_claude
@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json"])
def test_claude_plugin_validate_strict(target: str, tmp_path: Path) -> None:
    # "." validates the marketplace; the plugin manifest path also validates every skill and command
    done = claude("plugin", "validate", "--strict", target, home=tmp_path, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def uv_environment(home: Path) -> dict[str, str]:
    """Where uv finds packages: this machine's pip configuration (index, extra indexes, find-links),
    passed through, and the invoking user's uv cache, so the clean HOME does not download every
    dependency again (and a warm cache works offline)."""
    pip_config = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
    ).stdout
    settings: dict[str, str] = {}
    for line in pip_config.splitlines():
        key, _, value = line.partition("=")
        settings[key.rsplit(".", 1)[-1]] = value.strip().strip("'\"")
    env: dict[str, str] = {}
    index = os.environ.get("PIP_INDEX_URL") or settings.get("index-url")
    extra = os.environ.get("PIP_EXTRA_INDEX_URL") or settings.get("extra-index-url")
    links = os.environ.get("PIP_FIND_LINKS") or settings.get("find-links")
    if index:
        env["UV_DEFAULT_INDEX"] = index
    if extra:
        env["UV_INDEX"] = extra
        env["UV_INDEX_STRATEGY"] = "unsafe-best-match"  # like pip: the best version across all indexes
    if links:
        env["UV_FIND_LINKS"] = links
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    cache = (
        subprocess.run([uv, "cache", "dir"], capture_output=True, text=True, timeout=60).stdout.strip()
        if uv
        else ""
    )
    env["UV_CACHE_DIR"] = os.environ.get("UV_CACHE_DIR") or cache or str(home / ".cache" / "uv")
    env["UV_PYTHON"] = getattr(sys, "_base_executable", sys.executable)  # no managed Python download
    env["MCP_TIMEOUT"] = "180000"  # the first start builds the checkout (about 10 s, more on a cold cache)
    return env


@needs_claude
@pytest.mark.integration
def test_plugin_installs_from_the_marketplace_and_its_server_connects(tmp_path: Path) -> None:
    """The real thing: real uv (the dev extra installs it from PyPI), a clean HOME, the plugin
    installed from a marketplace holding a copy of this checkout, and its manifest unchanged."""
    uvx = shutil.which("uvx", path=str(Path(sys.executable).parent)) or shutil.which("uvx")
    if uvx is None:
        pytest.skip("uv is not installed (pip install -e '.[dev]' installs it)")
    market = checkout_copy(tmp_path / "market")
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    path = f"{Path(uvx).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    extra = uv_environment(home)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return claude(*args, home=home, cwd=project, path=path, extra=extra)

    added = run("plugin", "marketplace", "add", str(market))
    assert added.returncode == 0, added.stdout + added.stderr
    installed = run("plugin", "install", "flexsql@flexsql")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    details = run("plugin", "details", "flexsql@flexsql").stdout
    skills_line = next(ln for ln in details.splitlines() if ln.strip().startswith("Skills ("))
    assert all(name in skills_line for name in [*SKILLS, "ask"]), details
    assert re.search(r"MCP servers \(1\)\s+flexsql", details), details

    listed = run("mcp", "list")
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("plugin:flexsql:flexsql")), None)
    assert line is not None, listed.stdout + listed.stderr
    assert "uvx --from" in line and "flexsql serve" in line, line
    assert "✔ Connected" in line, line + "\n" + mcp_logs(home)


def checkout_copy(target: Path) -> Path:
    """This checkout as a user clones it: tracked and new files, nothing ignored."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


@needs_claude
@pytest.mark.integration
def test_claude_run_in_the_checkout_as_a_project_connects(tmp_path: Path) -> None:
    """Was: the root .mcp.json said `uvx --from ${CLAUDE_PLUGIN_ROOT}`, unset in a project: "Missing
    environment variables: CLAUDE_PLUGIN_ROOT" and "Failed to connect"."""
    uvx = shutil.which("uvx", path=str(Path(sys.executable).parent)) or shutil.which("uvx")
    if uvx is None:
        pytest.skip("uv is not installed (pip install -e '.[dev]' installs it)")
    checkout = checkout_copy(tmp_path / "flexsql")
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    # approving the project's servers, as a user does at the first start of `claude` there
    (home / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    path = f"{Path(uvx).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    listed = claude("mcp", "list", home=home, cwd=checkout, path=path, extra=uv_environment(home))
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("flexsql:")), None)
    assert line is not None, listed.stdout + listed.stderr
    assert "Missing environment variables" not in listed.stdout + listed.stderr
    assert "✔ Connected" in line, line + "\n" + mcp_logs(home)


@needs_claude
@pytest.mark.integration
def test_claude_mcp_add_with_the_printed_line_connects(tmp_path: Path) -> None:
    """The non-plugin route: run the exact `claude mcp add` line that `flexsql mcp-config` prints."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    url = make_duckdb(tmp_path)
    line = config_output("--client", "claude", "--db", url).strip()
    argv = shlex.split(line)
    assert argv[:3] == ["claude", "mcp", "add"]
    added = claude(*argv[1:], home=home, cwd=project)
    assert added.returncode == 0, added.stdout + added.stderr
    listed = claude("mcp", "list", home=home, cwd=project)
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("flexsql:")), None)
    assert line is not None and "Connected" in line, listed.stdout + listed.stderr + mcp_logs(home)


# -- the skills' worked examples quote the demo database -------------------------------------------


def test_worked_examples_quote_the_demo_database_as_it_is() -> None:
    """The skills cite figures from the demo database; a change to its generator must update them."""
    import duckdb

    from flexsql.demo_db.cache import demo_db_path

    conn = duckdb.connect(str(demo_db_path()), read_only=True)

    def one(sql: str) -> tuple:
        return conn.execute(sql).fetchone()

    shipped_2024 = "o.status = 'S' AND o.ordered_at >= '2024-01-01' AND o.ordered_at < '2025-01-01'"
    net = "SUM(oi.quantity * oi.unit_price - oi.discount_amount)"
    figures = {
        "flexsql-explore": [
            f"'{s}' {n:,}"
            for s, n in conn.execute(
                "SELECT status, COUNT(*) FROM orders GROUP BY 1 ORDER BY 2 DESC"
            ).fetchall()
        ],
        "flexsql-solve": [
            "Boots {:,.2f}".format(
                *one(
                    f"SELECT {net} FROM orders o JOIN customer_addresses a ON a.address_id = o.ship_address_id "
                    f"JOIN order_items oi USING (order_id) JOIN products p USING (product_id) "
                    f"JOIN product_categories pc USING (category_id) WHERE {shipped_2024} "
                    f"AND LOWER(TRIM(a.country)) = 'france' AND pc.category_name = 'Boots'"
                )
            ),
            "Boots {:,.2f}: it dropped".format(
                *one(
                    f"SELECT {net} FROM orders o JOIN customer_addresses a ON a.address_id = o.ship_address_id "
                    f"JOIN order_items oi USING (order_id) JOIN products p USING (product_id) "
                    f"JOIN product_categories pc USING (category_id) WHERE {shipped_2024} "
                    f"AND a.country = 'France' AND pc.category_name = 'Boots'"
                )
            ),
            "dropped {:,} of the {:,} French addresses".format(
                *one(
                    "SELECT COUNT(*) FILTER (WHERE country <> 'France'), COUNT(*) FROM customer_addresses "
                    "WHERE LOWER(TRIM(country)) = 'france'"
                )
            ),
        ],
        "flexsql-verify": [
            "{:,.2f}".format(
                *one(
                    f"SELECT {net} FROM orders o JOIN order_items oi USING (order_id) "
                    f"JOIN payments pay USING (order_id) WHERE {shipped_2024}"
                )
            ),
            "{:,.2f}".format(
                *one(f"SELECT {net} FROM orders o JOIN order_items oi USING (order_id) WHERE {shipped_2024}")
            ),
            "{:,} rows for {:,} orders".format(
                *one(
                    f"SELECT COUNT(*), COUNT(DISTINCT order_id) FROM orders o JOIN payments USING (order_id) "
                    f"WHERE {shipped_2024}"
                )
            ),
        ],
    }
    conn.close()
    for skill, quoted in figures.items():
        text = (ROOT / "skills" / skill / "SKILL.md").read_text(encoding="utf-8")
        for figure in quoted:
            assert figure in text, (
                f"{skill}: the demo database now gives {figure!r}; update the worked example"
            )
