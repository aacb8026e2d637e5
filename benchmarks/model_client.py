"""What the OpenAI-compatible backend itself costs per call (SDK, HTTP over loopback, parsing),
against the instant OpenAI stub: sequential latency, and throughput with N callers under the
endpoint's concurrency limit. The pipeline's own overhead budget (benchmarks/agent_overhead.py)
includes this per model call when it runs against the stub.

    python benchmarks/model_client.py [--calls 200] [--callers 16] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from flexsql.agent.models import ChatRequest, OpenAICompatModel, ResolvedModelConfig  # noqa: E402
from tests.support.openai_stub import OpenAIStub, Reply  # noqa: E402

TOOL = {
    "type": "function",
    "function": {
        "name": "search_schema",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


def request(i: int) -> ChatRequest:
    return ChatRequest(
        stage="implement",
        run_id=f"q{i}",
        tools=[TOOL],
        messages=[
            {"role": "system", "content": "You write SQL. " * 200},
            {"role": "user", "content": f"Question {i}: how many orders per month in 2024?"},
        ],
    )


async def run(calls: int, callers: int, concurrency: int) -> dict[str, float]:
    answer = Reply(content='{"language": "sql", "code": "SELECT month, count(*) FROM orders GROUP BY 1"}')
    with OpenAIStub(lambda req: answer) as stub:
        model = OpenAICompatModel(
            ResolvedModelConfig(base_url=stub.base_url, model="stub", concurrency=concurrency)
        )
        await model.complete(request(-1))  # warm: client and connection
        latencies = []
        for i in range(calls):
            start = time.perf_counter()
            await model.complete(request(i))
            latencies.append(time.perf_counter() - start)

        async def caller(k: int) -> None:
            for i in range(calls // callers):
                await model.complete(request(k * 1000 + i))

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for k in range(callers):
                tg.start_soon(caller, k)
        wall = time.perf_counter() - start
        assert stub.max_in_flight <= concurrency
    latencies.sort()
    return {
        "calls": calls,
        "median_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))] * 1000,
        "callers": callers,
        "concurrency": concurrency,
        "concurrent_calls_per_s": (calls // callers) * callers / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    result = anyio.run(run, args.calls, args.callers, args.concurrency)
    print(f"{'calls':>6} {'median ms':>10} {'p95 ms':>8} {'callers':>8} {'limit':>6} {'calls/s':>8}")
    print(
        f"{result['calls']:>6} {result['median_ms']:>10.2f} {result['p95_ms']:>8.2f} {result['callers']:>8} "
        f"{result['concurrency']:>6} {result['concurrent_calls_per_s']:>8.0f}"
    )
    out = Path(__file__).parent / "results" / "model_client.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
