"""A writer beside steady reads of a DuckDB file (issue 30, item 15): how often a writer retrying every
0.2 s gets the file while a source reads it every `--every` seconds (0: back to back, from two threads),
the longest it waited, and what letting go costs the reads — their latency against the same reads
with no writer, in the same run. Before: reads less than 2 s apart kept every writer out (192 of 193
lock attempts failed in 40 s).

    python benchmarks/duckdb_writers.py [--seconds 30] [--every 0.3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from flexsql.tools.engines import open_source  # noqa: E402

WRITER = """
import json, sys, time
import duckdb
path, seconds = sys.argv[1], float(sys.argv[2])
tries, wins, gaps, last = 0, 0, [], time.monotonic()
end = time.monotonic() + seconds
while time.monotonic() < end:
    tries += 1
    try:
        conn = duckdb.connect(path)
    except duckdb.Error:
        pass
    else:
        conn.execute("INSERT INTO events SELECT i FROM range(1000) t(i)")
        conn.close()
        wins += 1
        gaps.append(time.monotonic() - last)
        last = time.monotonic()
    time.sleep(0.2)
gaps.append(time.monotonic() - last)
print(json.dumps({"tries": tries, "wins": wins, "longest_wait_s": round(max(gaps), 2)}))
"""


def _reads(source, seconds: float, every: float, threads: int) -> list[float]:
    times: list[float] = []
    end = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < end:
            started = time.perf_counter()
            source.execute("SELECT count(*), sum(n) FROM events", timeout_s=30)
            times.append((time.perf_counter() - started) * 1000)
            if every:
                time.sleep(every)

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--every", type=float, default=0.3)
    args = parser.parse_args()
    threads = 1 if args.every else 2
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "live.duckdb"
        with duckdb.connect(str(path)) as conn:
            conn.execute("CREATE TABLE events AS SELECT i AS n FROM range(1000000) t(i)")
        source = open_source(f"duckdb:///{path}")
        alone = _reads(source, min(args.seconds, 10), args.every, threads)
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(args.seconds)], stdout=subprocess.PIPE, text=True
        )
        beside = _reads(source, args.seconds, args.every, threads)
        counts = json.loads(writer.communicate()[0])
        source.close()

    def q(values: list[float], at: float) -> float:
        return round(sorted(values)[min(len(values) - 1, int(at * len(values)))], 1)

    rows = {
        "read_every_s": args.every,
        "reader_threads": threads,
        "writer_tries": counts["tries"],
        "writer_wins": counts["wins"],
        "writer_longest_wait_s": counts["longest_wait_s"],
        "reads_alone": len(alone),
        "reads_beside_writer": len(beside),
        "read_ms_p50_alone": round(statistics.median(alone), 1),
        "read_ms_p50_beside": round(statistics.median(beside), 1),
        "read_ms_p95_alone": q(alone, 0.95),
        "read_ms_p95_beside": q(beside, 0.95),
        "read_ms_max_beside": q(beside, 1.0),
        "p50_x_alone": round(statistics.median(beside) / statistics.median(alone), 2),
    }
    for key, value in rows.items():
        print(f"{key:<26}{value}")
    out = Path(__file__).parent / "results" / "duckdb_writers.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
