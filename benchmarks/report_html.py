"""How fast report.html opens and filters in Debian's headless chromium, with screenshots.

Reports measured:
- `builtin-1000`: a report of 1,001 builtin-agent tasks with traces. A real `flexsql eval --runner
  builtin` run (tests/support/report_runs.py: the agent against a real OpenAI-compatible server playing
  a model with mistakes) of --real tasks; its records are then repeated under new ids up to --tasks,
  each keeping its real trace, and the reports written again (a run of 1,000 agent tasks takes
  minutes; the page has the same size and shape either way).
- `spider-dev_open`, `spider-train-1000`: `flexsql eval --runner gold` replays of Spider 1.0 dev_open
  (267 questions) and of benchmarks/spider_gold.py's 1,000-question train sample (no traces).
- `…-summary-only`: the same report without the task explorer — the baseline, in the same run.

For each: the file size; the time from navigation to the explorer being ready (its script has parsed
the data and drawn the list and charts), to DOMContentLoaded and to the load event, median of
--repeat fresh loads; the CPU time all of chromium's processes spent on one load (user + system, from
/proc: unlike the wall time it hardly moves with the machine's load, and it bounds the wall time on
an idle core); then the time one filter change takes (outcome = failed, then a database) and one
task's details to open. Screenshots go to benchmarks/results/report_html/.

Usage: python benchmarks/report_html.py [--data ../shared/data] [--real 70] [--tasks 1000] [--repeat 3]
Prints a table; writes benchmarks/results/report_html.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout: tests.support
sys.path.insert(0, str(ROOT / "benchmarks"))

from spider_gold import load_questions  # noqa: E402

from flexsql.evals.harness import EvalOptions, Evaluation  # noqa: E402
from flexsql.evals.report import html_report, summarize, write_reports  # noqa: E402
from flexsql.evals.tasks import load_tasks  # noqa: E402
from tests.support.browser import Browser  # noqa: E402
from tests.support.report_runs import TASKS, builtin_run  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SHOTS = ROOT / "benchmarks" / "results" / "report_html"
READY = "return document.getElementById('explorer-root') && document.getElementById('explorer-root').dataset.ready"


def synthesize(out: Path, tasks_file: Path, total: int) -> None:
    """Repeat a real run's records (and task list) under new ids up to `total`, rewrite the reports."""
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    items = json.loads(tasks_file.read_text())
    many_items, many_records = [], []
    for i in range(total):
        src = records[i % len(records)]
        many_records.append({**src, "instance_id": str(i)})
        many_items.append(items[int(src["instance_id"])])
    big = out.parent / "tasks-big.json"
    big.write_text(json.dumps(many_items))
    tasks = load_tasks(big)
    summary = summarize(many_records, tasks, "ex", runner="builtin", provenance={"model": "stub"})
    write_reports(out, summary, many_records)


def summary_only(report: Path) -> Path:
    """The same run's report without the explorer (the baseline page)."""
    summary = json.loads((report.parent / "summary.json").read_text())
    target = report.parent / "report-summary-only.html"
    target.write_text(html_report(summary, None))
    return target


def tree_cpu_ms(root: int) -> float:
    """User + system CPU time of process `root` and all its descendants (chromedriver's browser)."""
    procs: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        procs[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += procs.get(pid, (0, 0))[1]
        stack += children.get(pid, [])
    return total * 1000 / os.sysconf("SC_CLK_TCK")


def timings(browser: Browser, page: Path, repeat: int, explorer: bool) -> dict[str, Any]:
    loads: list[dict[str, float]] = []
    for _ in range(repeat):
        browser.open("about:blank")
        time.sleep(0.2)
        cpu = tree_cpu_ms(browser.process.pid)
        browser.open(page)
        if explorer:
            browser.wait_for(READY, timeout_s=60)
        nav = browser.js(
            "const n = performance.getEntriesByType('navigation')[0];"
            "return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, ready: window.reportReadyMs || null}"
        )
        nav["cpu"] = tree_cpu_ms(browser.process.pid) - cpu
        loads.append(nav)
    row: dict[str, Any] = {
        "bytes": page.stat().st_size,
        "dom_content_loaded_ms": round(statistics.median(x["dcl"] for x in loads), 1),
        "load_ms": round(statistics.median(x["load"] for x in loads), 1),
        "load_ms_min": round(min(x["load"] for x in loads), 1),
        "cpu_ms": round(statistics.median(x["cpu"] for x in loads), 1),
    }
    if explorer:
        row["explorer_ready_ms"] = round(statistics.median(x["ready"] for x in loads), 1)
        row["rows"] = browser.js("return document.querySelectorAll('tr.ex-row').length")  # listed (a page)
        row["filter_failed_ms"] = _timed_change(browser, "f-outcome", "failed")
        db = browser.js("return document.getElementById('f-db').options[1].value")
        row["filter_db_ms"] = _timed_change(browser, "f-db", db)
        row["shown_after_filters"] = browser.js("return document.getElementById('f-count').textContent")
        row["open_task_ms"] = browser.js(
            "if (!document.querySelector('tr.ex-row')) document.getElementById('f-reset').click();"
            "const row = document.querySelector('tr.ex-row');"
            "const t0 = performance.now(); row.click(); document.body.offsetHeight;"
            "return Math.round((performance.now() - t0) * 10) / 10"
        )
        errors = browser.console_errors()
        if errors:
            raise RuntimeError(f"{page}: the page's scripts failed: {errors}")
    return row


def _timed_change(browser: Browser, select_id: str, value: str) -> float:
    """A filter change as the browser sees it: the change event, the re-filter, the layout after."""
    return float(
        browser.js(
            "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
            "const t0 = performance.now(); s.dispatchEvent(new Event('change'));"
            "document.body.offsetHeight; return Math.round((performance.now() - t0) * 10) / 10",
            select_id,
            value,
        )
    )


def shots(browser: Browser, page: Path, name: str) -> list[str]:
    """The top of the report, the explorer filtered to failures, one failed task opened."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    out = []
    browser._call("POST", "/window/rect", {"width": 1400, "height": 1000})
    browser.open(page.as_uri())
    browser.wait_for(READY, timeout_s=60)
    browser.screenshot(SHOTS / f"{name}-top.png", full_page=False)
    out.append(f"{name}-top.png")
    failed = browser.js("return document.querySelector('#f-outcome option[value=failed]').textContent")
    fragment = (
        "#outcome=failed"
        if not failed.endswith("(0)")
        else "#db=" + browser.js("return document.getElementById('f-db').options[1].value")
    )
    browser.open(page.as_uri() + fragment)
    browser.wait_for(READY, timeout_s=60)
    browser.js("document.getElementById('explorer').scrollIntoView()")
    browser.screenshot(SHOTS / f"{name}-filtered.png", full_page=False)
    out.append(f"{name}-filtered.png")
    browser.js(
        "const row = Array.from(document.querySelectorAll('tr.ex-row')).find(r => !r.hidden); row.click();"
        "row.scrollIntoView()"
    )
    height = int(
        browser.js("return document.querySelector('tr.ex-detail').getBoundingClientRect().height + 120")
    )
    browser._call("POST", "/window/rect", {"width": 1400, "height": min(4000, max(1000, height))})
    browser.js("document.querySelector('tr.ex-row.open').scrollIntoView()")
    browser.screenshot(SHOTS / f"{name}-task.png", full_page=False)
    out.append(f"{name}-task.png")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--real", type=int, default=70, help="builtin tasks really run (a multiple of 7)")
    parser.add_argument("--tasks", type=int, default=1001)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    screenshots: list[str] = []
    with tempfile.TemporaryDirectory(prefix="flexsql-report-html-") as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        out = builtin_run(tmp / "builtin", copies=max(1, args.real // len(TASKS)), jobs=2)
        real_s = time.perf_counter() - started
        synthesize(out, tmp / "builtin" / "tasks.json", args.tasks)
        pages = {"builtin-1000": out / "report.html"}
        spider = args.data / "spider"
        for name, tasks_file in (("spider-dev_open", spider / "dev_open.json"), ("spider-train-1000", None)):
            if tasks_file is None:
                tasks_file = tmp / "train-1000.json"
                tasks_file.write_text(json.dumps(load_questions(spider)["train-1000"]))
            options = EvalOptions(
                tasks=tasks_file,
                runner="gold",
                dbs=spider / "databases",
                out=tmp / name,
                jobs=2,
                resume=False,
            )
            Evaluation(options).run()
            pages[name] = tmp / name / "report.html"
        with Browser(tmp / "chromium") as browser:
            for name, page in pages.items():
                results[name] = timings(browser, page, args.repeat, explorer=True)
                results[name + "-summary-only"] = timings(
                    browser, summary_only(page), args.repeat, explorer=False
                )
            screenshots += shots(browser, pages["builtin-1000"], "builtin-1000")
            screenshots += shots(browser, pages["spider-dev_open"], "spider-dev_open")
        shutil.copy(pages["builtin-1000"], SHOTS / "builtin-1000-report.html")
    load = os.getloadavg()[0]
    print(f"builtin run of {args.real} real tasks: {real_s:.1f} s; load {load:.1f}; {args.repeat} loads each")
    head = (
        f"{'report':<32}{'MB':>7}{'rows':>6}{'ready ms':>10}{'DCL ms':>9}{'load ms':>9}{'min':>7}{'CPU ms':>8}"
        f"{'filter ms':>11}{'db ms':>7}{'open ms':>9}"
    )
    print(head)
    for name, r in results.items():
        print(
            f"{name:<32}{r['bytes'] / 1e6:>7.2f}{r.get('rows', ''):>6}{r.get('explorer_ready_ms', ''):>10}"
            f"{r['dom_content_loaded_ms']:>9}{r['load_ms']:>9}{r['load_ms_min']:>7}{r['cpu_ms']:>8}"
            f"{r.get('filter_failed_ms', ''):>11}"
            f"{r.get('filter_db_ms', ''):>7}{r.get('open_task_ms', ''):>9}"
        )
    for name in ("builtin-1000", "spider-dev_open", "spider-train-1000"):
        base = results[name + "-summary-only"]["load_ms"]
        cpu = results[name]["cpu_ms"] / results[name + "-summary-only"]["cpu_ms"]
        print(
            f"{name}: explorer ready at {results[name]['explorer_ready_ms'] / base:.2f}x the summary-only load "
            f"time, {cpu:.2f}x its CPU time"
        )
    out_json = ROOT / "benchmarks" / "results" / "report_html.json"
    out_json.write_text(
        json.dumps({"load": os.getloadavg(), "results": results, "screenshots": screenshots}, indent=2)
    )
    print(f"screenshots in {SHOTS}: {', '.join(screenshots)}")
    print(f"wrote {out_json}")


if __name__ == "__main__":
    main()
