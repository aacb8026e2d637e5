"""The value index on many tables (issue 30, items 3 and 11): how long the first find_values takes now
that a call waits for the build at most [limits] value_index_wait_s, how long the build then goes on in
the background, and what lookups cost while another client refreshes the index — against the same
lookups on an idle index, in the same run. Before: the first call built every table in the call (99-201 s
on 100k tables), and lookups during another client's refresh either waited for it or answered "no value".

    python benchmarks/value_index_build.py [--tables 1500] [--wait 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402


def _lookups(ctx, seconds: float) -> tuple[list[float], int]:
    from flexsql.tools.values.find import FindValues, find_values

    times, misses = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        out = find_values(ctx, FindValues(text="Zanzibar"))
        times.append((time.perf_counter() - started) * 1000)
        misses += not any(m.value == "Zanzibar" for m in out.matches)
        time.sleep(0.05)
    return times, misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", type=int, default=1500)
    parser.add_argument("--wait", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["FLEXSQL_CACHE_DIR"] = str(Path(tmp) / "cache")
        from flexsql.config import LimitsConfig
        from flexsql.tools.engines import SourceRegistry, open_source
        from flexsql.tools.runtime.context import ToolContext
        from flexsql.tools.values.find import FindValues, build_value_index, find_values
        from flexsql.tools.values.index import ValueIndex

        path = Path(tmp) / "many.duckdb"
        with duckdb.connect(str(path)) as conn:
            conn.execute("CREATE TABLE places AS SELECT 'Zanzibar' AS place")
            for i in range(args.tables):
                conn.execute(
                    f"CREATE TABLE t{i:05d} AS SELECT 'label' || (r % 40) AS label FROM range(500) t(r)"
                )
        limits = LimitsConfig(value_index_wait_s=args.wait)
        source = open_source(f"duckdb:///{path}", name="many", limits=limits)
        ctx = ToolContext(sources=SourceRegistry([source]), limits=limits)
        source.catalog()

        started = time.perf_counter()
        first = find_values(ctx, FindValues(text="label7"))
        first_s = time.perf_counter() - started
        index: ValueIndex = ctx.caches["values:many"]
        while index._builder is not None:
            time.sleep(0.2)
        built_s = time.perf_counter() - started

        idle, idle_misses = _lookups(ctx, 5)
        # another session of the same server refreshes (sessions share the index object, as in the server)
        other = ToolContext(sources=SourceRegistry([source]), limits=limits, caches=ctx.caches)
        refresher = threading.Thread(target=lambda: build_value_index(other, refresh=True))
        refresh_started = time.perf_counter()
        refresher.start()
        during, during_misses = _lookups(ctx, 10)
        refresher.join()
        refresh_s = time.perf_counter() - refresh_started
        source.close()

    def p(values: list[float], q: float) -> float:
        return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 1)

    rows = {
        "tables": args.tables + 1,
        "value_index_wait_s": args.wait,
        "first_call_s": round(first_s, 1),
        "first_call_pending_tables": first.index_tables_pending,
        "build_total_s": round(built_s, 1),
        "refresh_s": round(refresh_s, 1),
        "idle_lookup_ms_p50": round(statistics.median(idle), 1),
        "idle_lookup_ms_max": p(idle, 1.0),
        "during_refresh_ms_p50": round(statistics.median(during), 1),
        "during_refresh_ms_max": p(during, 1.0),
        "during_refresh_x_idle_p50": round(statistics.median(during) / statistics.median(idle), 1),
        "lookups_idle": len(idle),
        "lookups_during_refresh": len(during),
        "false_no_value": idle_misses + during_misses,
    }
    for key, value in rows.items():
        print(f"{key:<30}{value}")
    out = Path(__file__).parent / "results" / "value_index_build.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
