"""How quickly a query past its timeout is cancelled on each engine, and that the source answers
right after. Needs FLEXSQL_TEST_PG_DSN for PostgreSQL.

    python benchmarks/timeouts.py [--timeout 1] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from flexsql.errors import QueryTimeout  # noqa: E402
from flexsql.tools.engines import open_source  # noqa: E402
from tests.support.engines import engine_url, pg_dsn  # noqa: E402

LONG = {
    "duckdb": "SELECT count(*) FROM range(1000000000000) a",
    "sqlite": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
    "postgres": "SELECT count(*) FROM generate_series(1, 100000000000)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    engines = [e for e in LONG if e != "postgres" or pg_dsn()]
    with tempfile.TemporaryDirectory() as tmp:
        for engine in engines:
            with engine_url(engine, Path(tmp)) as url:
                source = open_source(url)
                waits, follow = [], []
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    try:
                        source.execute(LONG[engine], timeout_s=args.timeout)
                        raise SystemExit(f"{engine}: the long query finished instead of timing out")
                    except QueryTimeout:
                        waits.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    source.execute("SELECT count(*) FROM orders")
                    follow.append((time.perf_counter() - started) * 1000)
                source.close()
                rows.append(
                    {
                        "engine": engine,
                        "timeout_s": args.timeout,
                        "median_s": round(statistics.median(waits), 3),
                        "max_s": round(max(waits), 3),
                        "overshoot_max_s": round(max(waits) - args.timeout, 3),
                        "next_query_ms": round(statistics.median(follow), 2),
                    }
                )
    print(f"{'engine':<10}{'timeout':>8}{'median s':>10}{'max s':>8}{'overshoot':>11}{'next query ms':>15}")
    for r in rows:
        print(
            f"{r['engine']:<10}{r['timeout_s']:>8}{r['median_s']:>10}{r['max_s']:>8}{r['overshoot_max_s']:>11}"
            f"{r['next_query_ms']:>15}"
        )
    out = Path(__file__).parent / "results" / "timeouts.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
