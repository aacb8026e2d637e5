"""An OpenAI-compatible endpoint that plays a perfect model from a task file's gold answers.

It answers each stage of the agent's contract by its `X-FlexSQL-Stage` header and finds the task by
`X-FlexSQL-Run` (the builtin eval runner sends the task's instance id): classify with the gold turn
type (dialogues) or "answerable", plan with K trivial plans, implement with the task's gold SQL,
evaluate with "ok". With it, `flexsql eval --runner builtin` measures what the pipeline itself does
to a correct answer (quoting, limits, rewriting, selection) — it should score what `--runner gold`
scores — and `flexsql ask` can be tried without a model (`--question-sql`).

    python benchmarks/scripted_endpoint.py --tasks ../shared/data/spider/dev_open.json --port 8765 &
    flexsql eval ../shared/data/spider/dev_open.json --runner builtin --dbs ../shared/data/spider/databases \
        --base-url http://127.0.0.1:8765/v1 --model scripted

    python benchmarks/scripted_endpoint.py --question-sql "SELECT count(*) FROM orders" --port 8765
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from flexsql.evals.runners import safe_name  # noqa: E402
from flexsql.evals.tasks import Task, load_tasks  # noqa: E402
from tests.support.openai_stub import OpenAIStub, Reply, StubRequest  # noqa: E402

_TYPE_STATUS = {"ambiguous": "ambiguous", "unanswerable": "unanswerable", "improper": "improper"}


class GoldScript:
    def __init__(self, tasks: list[Task], fixed_sql: str | None = None) -> None:
        self.by_run = {safe_name(t.instance_id): t for t in tasks}
        self.fixed_sql = fixed_sql
        self.calls = 0

    def task(self, request: StubRequest) -> Task | None:
        return self.by_run.get(request.run_id or "")

    def __call__(self, request: StubRequest) -> Any:
        self.calls += 1
        task = self.task(request)
        stage = request.stage
        if stage == "classify":
            kind = "answerable"
            if task is not None and task.turn_type in _TYPE_STATUS and not task.gold_sql:
                kind = _TYPE_STATUS[task.turn_type]
            return {
                "type": kind,
                "clarifying_question": "Which one do you mean?" if kind == "ambiguous" else None,
                "reason": "the database does not hold that" if kind == "unanswerable" else None,
                "reply": "You're welcome!" if kind == "improper" else None,
            }
        if stage == "link":
            return {"tables": [], "notes": ""}
        if stage == "knowledge":
            return {"summary": "(summary)"}
        if stage == "plan":
            k = _plan_count(request.body)
            return {
                "plans": [
                    {
                        "reading": f"reading {i + 1}",
                        "text": f"Plan {i + 1}: answer with the known query.",
                        "tables": [],
                    }
                    for i in range(k)
                ]
            }
        if stage in ("implement", "repair"):
            sql = self.fixed_sql or (task.gold_sql if task is not None else None)
            if not sql:
                return Reply(content='{"language": "sql", "code": "SELECT 1 WHERE 1 = 0"}')
            return {"language": "sql", "code": sql}
        if stage == "evaluate":
            return {"verdict": "ok", "feedback": "the result answers the question"}
        if stage == "revise_plan":
            return {"reading": "revised", "text": "Answer with the known query.", "tables": []}
        raise ValueError(f"unknown stage {stage!r}")


def _plan_count(body: dict[str, Any]) -> int:
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    plans = schema.get("properties", {}).get("plans", {})
    if "minItems" in plans:
        return int(plans["minItems"])
    text = "\n".join(str(m.get("content")) for m in body.get("messages", []))
    found = re.search(r"Write exactly (\d+) plans", text)
    return int(found.group(1)) if found else 4


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", type=Path, help="a task file whose gold SQL answers (Spider, Spider 2.0, dialogues)"
    )
    parser.add_argument("--question-sql", help="answer every question with this SQL instead")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--prefix-cache",
        action="store_true",
        help="simulate a prefix cache and report cached prompt tokens, as vLLM and OpenAI do",
    )
    args = parser.parse_args()
    if not args.tasks and not args.question_sql:
        parser.error("give --tasks FILE or --question-sql SQL")
    tasks = load_tasks(args.tasks) if args.tasks else []
    script = GoldScript(tasks, args.question_sql)
    with OpenAIStub(script, port=args.port, keep_requests=False, prefix_cache=args.prefix_cache) as stub:
        print(f"scripted endpoint at {stub.base_url} ({len(tasks)} tasks); Ctrl-C stops it", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
