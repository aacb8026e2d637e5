"""Value variants on Spider: does find_values find a gold literal typed the way people type it?

The literals are those of value_linking.py: gold comparisons `column = 'literal'` of train.json whose
literal appears in the question, kept when the gold column stores the literal as written (one case
per database, table, column and literal). Each literal yields the variants that apply to it:
- spaces dropped ('North Carolina' -> 'NorthCarolina'), spaces added at CamelCase and letter/digit
  boundaries ('NorthCarolina' -> 'North Carolina'), a hyphen for a space or a space for a hyphen;
- one word of a multi-word value (a random word of three letters or more, not a stopword);
- a case change (lower, UPPER or Title, one that differs), the other grammatical number of its last
  word, a one-letter typo (substitution, deletion, insertion or transposition in a word of four
  letters or more).
The context is the question with the literal replaced by the variant. Four scopes: the question's
own database (`schema=`) with and without the context, the whole catalog (142 databases) with and
without it. A hit: the gold table.column among the top 1 / top 3 columns.

Generalization: the databases are split in two halves (A, B: by a hash of their name); every figure is
given per half. `--grid NAME=v1,v2,...` tunes one constant of tools/values/find.py: each value is run
on both halves, the best on one half is reported with its figure on the other (both ways).

Baseline: tools/values/ as of `--baseline-ref` (default: the commit before the variants work), loaded
from git into a private package with its own index file, measured in the same run on the same cases.

    python benchmarks/value_variants.py [--data ../shared/data/spider] [--workdir DIR] [--fold A|B]
        [--scopes db+context,db,catalog+context,catalog] [--no-baseline] [--grid NAME=v1,v2]
    python benchmarks/value_variants.py --warehouse /tmp/flexsql-bench/warehouse/wh_COVID19_USA.duckdb
        (find_values latency, warm, baseline and new, on one warehouse file)

Prints a table per scope and writes benchmarks/results/value_variants.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from schema_linking import DEFAULT_DATA  # noqa: E402
from spider_catalog import build_spider_catalog, catalog_stamp, quote_name  # noqa: E402
from spider_gold import sqlite_schema  # noqa: E402
from value_linking import appears_in, literal_comparisons  # noqa: E402

BASELINE_REF = "07d38c0"  # the last commit before spacing, compound, plural matching (issue 19)
SCOPES = ("db+context", "db", "catalog+context", "catalog")
KINDS = (
    "spaces dropped",
    "spaces added",
    "hyphen/space",
    "one word",
    "case",
    "number",
    "typo",
)
STOPWORDS = {"the", "of", "and", "in", "on", "for", "a", "an", "to", "at", "by", "with", "de", "la", "le"}
TOP = 3


# -- variants ---------------------------------------------------------------------------------------


def _rng(*key: str) -> random.Random:
    return random.Random(zlib.crc32("\x1f".join(key).encode()))


def _other_number(word: str) -> str | None:
    """The benchmark's own plural/singular of an English word (kept apart from the code under test)."""
    if len(word) < 3 or not word.isalpha():
        return None
    lower = word.lower()
    if lower.endswith("s") and not lower.endswith(("ss", "us", "is")):
        if lower.endswith("ies") and len(lower) > 4:
            return word[:-3] + ("Y" if word[-1].isupper() else "y")
        if lower.endswith(("ches", "shes", "xes", "sses", "zes")):
            return word[:-2]
        return word[:-1]
    suffix = "s"
    if lower.endswith("y") and lower[-2] not in "aeiou":
        return word[:-1] + ("IES" if word.isupper() else "ies")
    if lower.endswith(("ch", "sh", "x", "z", "s")):
        suffix = "es"
    return word + (suffix.upper() if word.isupper() else suffix)


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z]{2})(?=\d)")


def _typo(word: str, rng: random.Random) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = rng.randrange(len(word))
    op = rng.choice(("sub", "del", "ins", "swap"))
    if op == "swap" and i < len(word) - 1 and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if op == "del":
        return word[:i] + word[i + 1 :]
    if op == "ins":
        return word[:i] + rng.choice(letters) + word[i:]
    new = rng.choice([c for c in letters if c != word[i].lower()])
    return word[:i] + (new.upper() if word[i].isupper() else new) + word[i + 1 :]


def _compound_split(word: str, english: set[str]) -> str | None:
    """A word glued from two words of the questions' vocabulary, four letters or more each
    ('Basketball' -> 'Basket ball' needs 'basket'; 'Goldsmith' -> 'Gold smith')."""
    lower = word.lower()
    if not word.isalpha():
        return None
    for i in range(4, len(word) - 3):
        if lower[:i] in english and lower[i:] in english:
            return f"{word[:i]} {word[i:]}"
    return None


def variants(literal: str, key: str, english: set[str] = frozenset()) -> list[tuple[str, str]]:
    """(kind, text) for each kind of variant that applies to the literal; `english`: the words of the
    questions, to split compounds with."""
    out: list[tuple[str, str]] = []
    words = literal.split()
    if len(words) >= 2:
        out.append(("spaces dropped", "".join(words)))
    if _CAMEL.search(literal):
        out.append(("spaces added", _CAMEL.sub(" ", literal)))
    else:
        split = [_compound_split(w, english) or w for w in words]
        if split != words:
            out.append(("spaces added", " ".join(split)))
    if "-" in literal:
        out.append(("hyphen/space", literal.replace("-", " ")))
    elif len(words) >= 2:
        out.append(("hyphen/space", "-".join(words)))
    content = [w for w in words if len(re.sub(r"\W", "", w)) >= 3 and w.lower() not in STOPWORDS]
    if len(words) >= 2 and content:
        out.append(("one word", _rng(key, "word").choice(content).strip(",.;:()'\"")))
    if any(c.isalpha() for c in literal):
        cases = [c for c in (literal.lower(), literal.upper(), literal.title()) if c != literal]
        if cases:
            out.append(("case", _rng(key, "case").choice(cases)))
    if words:
        other = _other_number(words[-1])
        if other:
            out.append(("number", " ".join([*words[:-1], other])))
    long_words = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    if long_words:
        rng = _rng(key, "typo")
        i = rng.choice(long_words)
        typo = _typo(words[i], rng)
        if typo.lower() != words[i].lower():
            out.append(("typo", " ".join([*words[:i], typo, *words[i + 1 :]])))
    return [(k, t) for k, t in out if t.strip() and t != literal]


def _replace_in(question: str, literal: str, variant: str) -> str:
    pattern = re.compile(r"(?<!\w)" + re.escape(literal) + r"(?!\w)", re.IGNORECASE)
    return pattern.sub(lambda _: variant, question, count=1)


def fold_of(db: str) -> str:
    return "A" if zlib.crc32(db.encode()) % 2 == 0 else "B"


def load_cases(data: Path) -> list[dict[str, Any]]:
    databases = data / "databases"
    seen: set[tuple[str, str, str, str]] = set()
    literals: list[dict[str, Any]] = []
    schemas: dict[str, Any] = {}
    conns: dict[str, sqlite3.Connection] = {}
    for q in json.loads((data / "train.json").read_text()):
        db = q["db_id"]
        if db not in schemas:
            schemas[db] = sqlite_schema(databases, db)
        try:
            comparisons = literal_comparisons(q["query"], schemas[db])
        except Exception:
            continue
        for table, column, literal in comparisons:
            key = (db, table, column, literal)
            if key in seen or not appears_in(literal, q["question"]):
                continue
            seen.add(key)
            conn = conns.setdefault(db, sqlite3.connect(str(databases / db / f"{db}.sqlite")))
            real_table = next(t for t in schemas[db] if t.lower() == table)
            real_column = next(c for c in schemas[db][real_table] if c.lower() == column)
            (stored,) = conn.execute(
                f"SELECT count(*) FROM {quote_name(real_table)} WHERE CAST({quote_name(real_column)} AS TEXT) = ?",
                (literal,),
            ).fetchone()
            if stored:
                literals.append(
                    {
                        "db": db,
                        "table": table,
                        "column": column,
                        "literal": literal,
                        "question": q["question"],
                    }
                )
    for conn in conns.values():
        conn.close()
    english = {
        w
        for q in json.loads((data / "train.json").read_text())
        for w in re.findall(r"[a-z]+", q["question"].lower())
    }
    cases = []
    for lit in literals:
        key = "|".join((lit["db"], lit["table"], lit["column"], lit["literal"]))
        for kind, text in variants(lit["literal"], key, english):
            cases.append(
                {
                    **lit,
                    "kind": kind,
                    "text": text,
                    "context": _replace_in(lit["question"], lit["literal"], text),
                    "fold": fold_of(lit["db"]),
                }
            )
    return cases


# -- the code under test and the baseline -------------------------------------------------------------


def load_baseline(ref: str, workdir: Path) -> ModuleType:
    """tools/values/*.py as of `ref`, importable as a package of its own whose index has its own file."""
    root = Path(__file__).resolve().parent.parent
    name = "flexsql_values_baseline_" + re.sub(r"\W", "_", ref)
    target = workdir / "baseline" / name
    target.mkdir(parents=True, exist_ok=True)
    listing = subprocess.run(
        ["git", "ls-tree", "--name-only", ref, "tools/values/"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for path in listing:
        if not path.endswith(".py"):
            continue
        text = subprocess.run(
            ["git", "show", f"{ref}:{path}"], cwd=root, check=True, capture_output=True, text=True
        ).stdout
        text = text.replace("flexsql.tools.values.", f"{name}.").replace(
            "from flexsql.tools.values import", f"from {name} import"
        )
        (target / Path(path).name).write_text(text)
    sys.path.insert(0, str(target.parent))
    index = importlib.import_module(f"{name}.index")
    original = index.index_path
    index.index_path = lambda source: original(source).with_name(original(source).stem + "-baseline.sqlite")
    return importlib.import_module(f"{name}.find")


def build(find: ModuleType, url: str, label: str) -> tuple[Any, dict[str, Any]]:
    """A fresh context on the catalog, its value index built from scratch: (ctx, build figures)."""
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext

    source = open_source(url, name="spider")
    ctx = ToolContext(sources=SourceRegistry([source]))
    index = find.value_index(ctx, source)
    path = Path(index.path)
    for extra in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if extra.exists():
            extra.unlink()
    index.close()
    started = time.perf_counter()
    stats = find.build_value_index(ctx)
    seconds = time.perf_counter() - started
    index.close()  # the last connection checkpoints the WAL into the file
    figures = {"seconds": round(seconds, 2), "bytes": path.stat().st_size, "values": stats.values}
    print(
        f"{label}: value index built in {seconds:.1f} s, {path.stat().st_size / 1e6:.1f} MB, {stats.values:,} values"
    )
    return ctx, figures


def run(
    find: ModuleType, ctx: Any, cases: list[dict[str, Any]], scopes: list[str], schema_names: dict[str, str]
):
    """scope -> fold -> kind -> [cases, top1, top3, spelling]; and the misses."""
    table: dict[str, dict[str, dict[str, list[int]]]] = {
        s: defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0])) for s in scopes
    }
    misses: dict[str, list[dict[str, Any]]] = defaultdict(list)
    times: list[float] = []
    for scope in scopes:
        for case in cases:
            schema = schema_names.get(case["db"].lower(), case["db"])
            t0 = time.perf_counter()
            result = find.find_values(
                ctx,
                find.FindValues(
                    text=case["text"],
                    limit=TOP,
                    schema=schema if scope.startswith("db") else None,
                    context=case["context"] if scope.endswith("+context") else None,
                ),
            )
            times.append((time.perf_counter() - t0) * 1000)
            got = [(m.table.lower(), m.column.lower()) for m in result.matches]
            want = (f"{schema}.{case['table']}".lower(), case["column"])
            row = table[scope][case["fold"]][case["kind"]]
            row[0] += 1
            row[1] += bool(got) and got[0] == want
            hit = want in got[:TOP]
            row[2] += hit
            for m, where in zip(result.matches, got, strict=False):
                if where == want:
                    row[3] += case["literal"] in (m.value, *m.others)
            if not hit:
                misses[scope].append(
                    {
                        **{k: case[k] for k in ("db", "table", "column", "literal", "kind", "text")},
                        "got": [
                            f"{m.table}.{m.column}={m.value!r} ({m.match} {m.score})" for m in result.matches
                        ],
                    }
                )
    times.sort()
    latency = {
        "median_ms": round(times[len(times) // 2], 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
    }
    return table, misses, latency


def _share(row: list[int], i: int) -> float:
    return row[i] / row[0] if row[0] else float("nan")


def summarize(table: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scope, folds in table.items():
        out[scope] = {}
        for fold in ("A", "B"):
            kinds = folds.get(fold, {})
            total = [sum(r[i] for r in kinds.values()) for i in range(4)]
            out[scope][fold] = {
                k: {"cases": r[0], "top1": round(_share(r, 1), 4), f"top{TOP}": round(_share(r, 2), 4)}
                for k, r in [*sorted(kinds.items(), key=lambda kv: KINDS.index(kv[0])), ("all", total)]
            }
    return out


def print_tables(new: dict[str, Any], base: dict[str, Any] | None) -> None:
    for scope in new:
        print(f"\n{scope}: top1 / top{TOP} per half (A | B)")
        head = f"{'variant':<15} {'cases A|B':>10} | "
        head += f"{'baseline A':>13} {'baseline B':>13} | " if base else ""
        head += f"{'new A':>13} {'new B':>13}"
        print(head)
        print("-" * len(head))
        for kind in [*KINDS, "all"]:
            a, b = new[scope]["A"].get(kind), new[scope]["B"].get(kind)
            if a is None and b is None:
                continue

            def cell(r: dict[str, Any] | None) -> str:
                return f"{r['top1']:.3f}/{r[f'top{TOP}']:.3f}" if r and r["cases"] else "-"

            line = f"{kind:<15} {(a or {}).get('cases', 0):>4}|{(b or {}).get('cases', 0):<5} | "
            if base:
                line += f"{cell(base[scope]['A'].get(kind)):>13} {cell(base[scope]['B'].get(kind)):>13} | "
            line += f"{cell(a):>13} {cell(b):>13}"
            print(line)


def warehouse_latency(path: Path, workdir: Path, repeat: int, baseline: ModuleType | None) -> dict[str, Any]:
    """find_values latency, warm, on one warehouse file (benchmarks/warehouse_catalog.py builds them):
    literals drawn from its own value index (each as stored, and as a variant), then words it lacks;
    bare, then with a question-like context. p50/p95 over `repeat` rounds after a first (cold) one."""
    from flexsql.tools.values import find as new_find

    out: dict[str, Any] = {"warehouse": path.name}
    for label, find in (("baseline", baseline), ("new", new_find)):
        if find is None:
            continue
        ctx, figures = build(find, f"duckdb:///{path}", f"{label} {path.name}")
        index = find.value_index(ctx, ctx.source())
        sample = [v.value for v in index.by_vids(range(1, 400, 7))][:40]
        texts: list[tuple[str, str | None]] = []
        for i, value in enumerate(sample):
            kinds = variants(value, str(i))
            texts.append((value, None))
            if kinds:
                texts.append((kinds[i % len(kinds)][1], None))
        texts += [(t, None) for t in ("Zanzibar quartz", "NorthCarolina", "Frnace", "total cases", "Casey")]
        texts += [(t, f"how many rows have {t} in the data") for t, _ in texts[:20]]
        times: list[float] = []
        for rnd in range(repeat + 1):
            for text, context in texts:
                t0 = time.perf_counter()
                find.find_values(ctx, find.FindValues(text=text, context=context))
                if rnd:
                    times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        out[label] = {
            **figures,
            "calls": len(times),
            "p50_ms": round(times[len(times) // 2], 1),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
            "max_ms": round(times[-1], 1),
        }
        print(f"{label}: {out[label]}")
        ctx.source().close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "flexsql-bench")
    parser.add_argument("--scopes", default=",".join(SCOPES))
    parser.add_argument("--fold", choices=("A", "B"), help="only the databases of this half")
    parser.add_argument("--kinds", help="only these variant kinds (comma-separated)")
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--only",
        choices=("baseline", "new"),
        help="run one side and write its figures to benchmarks/results/value_variants-<side>.json; "
        "--merge then prints both (for running the two sides side by side, in two processes)",
    )
    parser.add_argument("--merge", action="store_true", help="print the tables of the two --only runs")
    parser.add_argument("--grid", help="NAME=v1,v2,...: tune a constant of tools/values/find.py per half")
    parser.add_argument("--misses", type=Path, help="write the new code's misses here (JSON)")
    parser.add_argument("--warehouse", type=Path, help="a warehouse DuckDB file: measure latency there only")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    scopes = args.scopes.split(",")
    if args.merge:
        sides = {
            k: json.loads((HERE / "results" / f"value_variants-{k}.json").read_text())
            for k in ("baseline", "new")
        }
        print(
            f"{sides['new']['cases']} variants (the two runs: {sides['baseline']['cases']} and {sides['new']['cases']})"
        )
        for label in ("baseline", "new"):
            print(
                f"{label} index: {sides[label][label + '_index']}; latency {sides[label][label + '_latency']}"
            )
        print_tables(sides["new"]["new"], sides["baseline"]["baseline"])
        return 0
    if args.warehouse:
        os.environ["FLEXSQL_CACHE_DIR"] = str(args.workdir / "warehouse-cache")
        base = None if args.no_baseline else load_baseline(args.baseline_ref, args.workdir)
        report = warehouse_latency(args.warehouse, args.workdir, args.repeat, base)
        out = HERE / "results" / "value_variants-latency.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2))
        print(f"wrote {out}")
        return 0

    databases = args.data / "databases"
    path = build_spider_catalog(databases, args.workdir / f"spider-{catalog_stamp(databases)}.duckdb")
    os.environ["FLEXSQL_CACHE_DIR"] = str(args.workdir / "variants-cache")
    cases = load_cases(args.data)
    if args.fold:
        cases = [c for c in cases if c["fold"] == args.fold]
    if args.kinds:
        cases = [c for c in cases if c["kind"] in args.kinds.split(",")]
    print(
        f"{len(cases)} variants of {len({(c['db'], c['table'], c['column'], c['literal']) for c in cases})} "
        f"gold literals (half A {sum(c['fold'] == 'A' for c in cases)}, half B {sum(c['fold'] == 'B' for c in cases)})"
    )
    from flexsql.tools.values import find as new_find

    url = f"duckdb:///{path}"
    report: dict[str, Any] = {"cases": len(cases), "scopes": scopes}
    base_summary = None
    if not args.no_baseline and args.only != "new":
        base_find = load_baseline(args.baseline_ref, args.workdir)
        ctx, report["baseline_index"] = build(base_find, url, f"baseline ({args.baseline_ref})")
        schema_names = {t.schema_name.lower(): t.schema_name for t in ctx.source().catalog().tables}
        table, _, report["baseline_latency"] = run(base_find, ctx, cases, scopes, schema_names)
        base_summary = report["baseline"] = summarize(table)
        ctx.source().close()
    if args.only == "baseline":
        print_tables(base_summary, None)
        out = HERE / "results" / "value_variants-baseline.json"
        out.write_text(json.dumps(report, indent=2))
        print(f"wrote {out}")
        return 0
    ctx, report["new_index"] = build(new_find, url, "new")
    schema_names = {t.schema_name.lower(): t.schema_name for t in ctx.source().catalog().tables}
    if args.grid:
        name, values = args.grid.split("=", 1)
        report["grid"] = {"name": name, "runs": {}}
        for raw in values.split(","):
            setattr(new_find, name, type(getattr(new_find, name))(raw))
            table, _, _ = run(new_find, ctx, cases, scopes, schema_names)
            summary = summarize(table)
            report["grid"]["runs"][raw] = summary
            figures = {
                f: sum(summary[s][f]["all"][f"top{TOP}"] for s in scopes) / len(scopes) for f in ("A", "B")
            }
            print(f"{name}={raw}: mean top{TOP} over scopes A {figures['A']:.4f}  B {figures['B']:.4f}")
            report["grid"]["runs"][raw]["mean"] = figures
        runs = report["grid"]["runs"]
        for tune, check in (("A", "B"), ("B", "A")):
            best = max(runs, key=lambda r: runs[r]["mean"][tune])
            print(
                f"tuned on {tune}: {name}={best} ({runs[best]['mean'][tune]:.4f}); "
                f"checked on {check}: {runs[best]['mean'][check]:.4f}"
            )
    else:
        table, misses, report["new_latency"] = run(new_find, ctx, cases, scopes, schema_names)
        report["new"] = summarize(table)
        print_tables(report["new"], base_summary)
        for label in ("baseline", "new"):
            if f"{label}_latency" in report:
                print(f"{label} latency: {report[f'{label}_latency']}")
        if args.misses:
            args.misses.write_text(json.dumps(misses, indent=2))
    ctx.source().close()
    out = HERE / "results" / ("value_variants-new.json" if args.only == "new" else "value_variants.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
