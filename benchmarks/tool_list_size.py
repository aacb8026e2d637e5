"""How many characters a client's model reads for flexsql's `tools/list`, per tool.

The client sends the tool list with every turn, so this is paid on every model call. Counted as
name + description + JSON of the input schema (what the model reads); output schemas separately.
Prints a table and writes benchmarks/results/tool_list_size.json.

    python benchmarks/tool_list_size.py
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from mcp import Client
from rich.console import Console
from rich.table import Table

from flexsql.config import Settings
from flexsql.demo_db.cache import demo_url
from flexsql.server.app import build_server
from flexsql.tools.engines import SourceRegistry, open_source


async def measure() -> list[dict]:
    registry = SourceRegistry()
    registry.add(open_source(demo_url(), name="demo"))
    server = build_server(Settings(), registry, allow_python=True)
    async with Client(server) as client:
        listed = await client.list_tools()
    rows = []
    for tool in listed.tools:
        schema = json.dumps(tool.input_schema)  # default separators: the stricter count
        output = json.dumps(tool.output_schema, separators=(",", ":")) if tool.output_schema else ""
        rows.append(
            {
                "tool": tool.name,
                "description": len(tool.description or ""),
                "input_schema": len(schema),
                "read": len(tool.name) + len(tool.description or "") + len(schema),
                "output_schema": len(output),
            }
        )
    return rows


def main() -> None:
    rows = anyio.run(measure)
    table = Table(title="tools/list size (characters)")
    for col in ("tool", "description", "input_schema", "read", "output_schema"):
        table.add_column(col, justify="left" if col == "tool" else "right")
    for r in rows:
        table.add_row(
            r["tool"], *(f"{r[k]:,}" for k in ("description", "input_schema", "read", "output_schema"))
        )
    total = {k: sum(r[k] for r in rows) for k in ("description", "input_schema", "read", "output_schema")}
    table.add_row(f"total ({len(rows)} tools)", *(f"{total[k]:,}" for k in total), style="bold")
    Console().print(table)
    out = Path(__file__).parent / "results" / "tool_list_size.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"tools": rows, "total": total, "target_read": 6000}, indent=2))


if __name__ == "__main__":
    main()
