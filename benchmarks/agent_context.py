"""What the model reads: characters per question, and how much of them an inference server's prefix
cache could serve, with a perfect simulated model (benchmarks/scripted_endpoint.py's GoldScript).

`flexsql eval --runner builtin` runs N Spider questions (spread over their databases) against a
loopback OpenAI-compatible endpoint that answers every stage as a perfect model would (classify
"answerable", K trivial plans, the gold SQL, "ok") and keeps every request body. Per question:

- requests and characters sent (each request flattened as a chat template lays it out: the system
  text, the tool definitions, then every message with its tool calls);
- shared within the question: each request's longest prefix shared with an earlier request of the
  same question (rounded down to 64 characters, ~16 tokens: vLLM caches in blocks), over all its
  characters;
- uncached with one server cache: characters not covered by the longest prefix shared with *any*
  earlier request of the run (one vLLM server answering the questions in turn, its cache warm);
- the same two figures from the agent's traces (`chars` / `shared_chars` of each request event), and
  the endpoint's own `cached_tokens` (the stub simulates a prefix cache and reports them in
  `usage.prompt_tokens_details`, as vLLM and OpenAI do) as the traces and results.jsonl record them;
- answers: the run's score (every answer right with a perfect model).

    python benchmarks/agent_context.py [--questions 40] [--plans 2] [--tasks FILE --dbs DIR]
    python benchmarks/agent_context.py --dialogues 20      # CoSQL dialogues: every turn a task
    python benchmarks/agent_context.py --traces DIR        # only read traces (an eval's --out, a folder of them)

Prints a table, writes benchmarks/results/agent_context.json.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout: tests.support, benchmarks.*

from benchmarks.scripted_endpoint import GoldScript  # noqa: E402
from flexsql.evals.tasks import load_tasks  # noqa: E402
from tests.support.openai_stub import CACHE_BLOCK, OpenAIStub, common_prefix, flatten  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data" / "spider"
DIALOGUES = HERE.parent.parent / "shared" / "data" / "multiturn" / "cosql_dev_open.json"
RESULTS = HERE / "results" / "agent_context.json"


def pick(tasks_file: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """n questions spread evenly over the file's databases (seeded)."""
    rows = json.loads(tasks_file.read_text())
    by_db: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_db[row["db_id"]].append(row)
    rng = random.Random(seed)
    for items in by_db.values():
        rng.shuffle(items)
    chosen: list[dict[str, Any]] = []
    dbs = sorted(by_db)
    i = 0
    while len(chosen) < n and any(by_db.values()):
        items = by_db[dbs[i % len(dbs)]]
        if items:
            chosen.append(items.pop())
        i += 1
    return chosen


def measure(requests: list[tuple[str, str]]) -> dict[str, Any]:
    """requests: (question id, flattened text) in the order the endpoint received them."""
    per_q: dict[str, dict[str, int]] = defaultdict(
        lambda: {"requests": 0, "chars": 0, "shared": 0, "uncached": 0}
    )
    earlier_all: list[str] = []
    earlier_q: dict[str, list[str]] = defaultdict(list)
    for qid, text in requests:
        own = max((common_prefix(text, t) for t in earlier_q[qid]), default=0) // CACHE_BLOCK * CACHE_BLOCK
        any_ = max((common_prefix(text, t) for t in earlier_all), default=0) // CACHE_BLOCK * CACHE_BLOCK
        row = per_q[qid]
        row["requests"] += 1
        row["chars"] += len(text)
        row["shared"] += own
        row["uncached"] += len(text) - any_
        earlier_q[qid].append(text)
        earlier_all.append(text)
    n = len(per_q) or 1
    chars = sum(r["chars"] for r in per_q.values())
    return {
        "questions": len(per_q),
        "requests_per_question": sum(r["requests"] for r in per_q.values()) / n,
        "chars_per_question": chars / n,
        "shared_within_question": sum(r["shared"] for r in per_q.values()) / chars if chars else 0.0,
        "uncached_per_question": sum(r["uncached"] for r in per_q.values()) / n,
        "largest_request": max((len(t) for _, t in requests), default=0),
    }


def from_traces(out: Path) -> dict[str, Any]:
    """The agent's own account: its traces' request events (chars, shared_chars) and the endpoint's
    cached tokens as the replies reported them."""
    chars = shared = prompt = cached = calls = 0
    seen = False
    for trace in sorted({*out.glob("tasks/*/trace.jsonl"), *out.glob("*.jsonl")}):
        for line in trace.read_text().splitlines():
            event = json.loads(line)
            if event.get("kind") == "request" and "chars" in event:
                seen = True
                chars += int(event["chars"])
                shared += int(event.get("shared_chars") or 0)
            if event.get("kind") == "reply":
                usage = event.get("usage") or {}
                calls += 1
                prompt += int(usage.get("prompt_tokens") or 0)
                cached += int(usage.get("cached_tokens") or 0)
    return {
        "trace_shared_within_question": (shared / chars if chars else 0.0) if seen else None,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "server_cached_share": cached / prompt if prompt else 0.0,
        "model_calls": calls,
    }


def run(tasks: list[dict[str, Any]], dbs: Path, plans: int, label: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tasks_file = Path(tmp) / "tasks.json"
        tasks_file.write_text(json.dumps(tasks))
        script = GoldScript(load_tasks(tasks_file))
        out = Path(tmp) / "out"
        with OpenAIStub(script, prefix_cache=True) as stub:
            start = time.perf_counter()
            proc = subprocess.run(
                [
                    str(Path(sys.executable).with_name("flexsql")),
                    "-q",
                    "eval",
                    str(tasks_file),
                    "--runner",
                    "builtin",
                    "--dbs",
                    str(dbs),
                    "--base-url",
                    stub.base_url,
                    "--model",
                    "scripted",
                    "--plans",
                    str(plans),
                    "--jobs",
                    "1",
                    "--out",
                    str(out),
                    "--quiet",
                    "--json",
                ],
                capture_output=True,
                text=True,
                env={**__import__("os").environ, "FLEXSQL_CACHE_DIR": tmp + "/cache"},
            )
            elapsed = time.perf_counter() - start
            if proc.returncode != 0:
                raise SystemExit(f"flexsql eval failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            summary = json.loads(proc.stdout)
            texts = [(r.run_id or "?", flatten(r.body)) for r in stub.requests]
        figures = measure(texts)
        figures.update(from_traces(out))
        results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line]
        figures["score"] = sum(float(r.get("score") or 0) for r in results) / max(1, len(results))
        figures["label"] = label
        figures["elapsed_s"] = round(elapsed, 1)
        figures["summary_accuracy"] = summary.get("accuracy")
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=Path, default=DATA / "dev_open.json")
    parser.add_argument("--dbs", type=Path, default=DATA / "databases")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--plans", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--label", default="current")
    parser.add_argument("--dialogues", type=int, help="run the first N CoSQL dialogues instead")
    parser.add_argument("--traces", type=Path, help="only measure the traces in this folder")
    args = parser.parse_args()
    if args.traces:
        print(json.dumps(from_traces(args.traces), indent=1))
        return
    if args.dialogues:
        tasks = json.loads(DIALOGUES.read_text())[: args.dialogues]
        args.label = f"{args.label}-dialogues"
    else:
        tasks = pick(args.tasks, args.questions, args.seed)
    figures = run(tasks, args.dbs, args.plans, args.label)
    keys = [
        ("questions", "{:.0f}"),
        ("requests_per_question", "{:.1f}"),
        ("chars_per_question", "{:,.0f}"),
        ("shared_within_question", "{:.3f}"),
        ("trace_shared_within_question", "{}"),
        ("uncached_per_question", "{:,.0f}"),
        ("server_cached_share", "{:.3f}"),
        ("largest_request", "{:,.0f}"),
        ("score", "{:.3f}"),
        ("elapsed_s", "{}"),
    ]
    print(f"{'figure':<30} {args.label}")
    for key, fmt in keys:
        value = figures.get(key)
        shown = fmt.format(value) if value is not None and "{}" not in fmt else str(value)
        print(f"{key:<30} {shown}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    previous[args.label] = {**figures, "questions_file": str(args.tasks.name), "plans": args.plans}
    RESULTS.write_text(json.dumps(previous, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
