"""Schema linking at warehouse scale: search_schema on the Spider 2.0-Snow databases.

For each of the 328 open Spider 2.0-Snow tasks, `search_schema` runs over that task's own database
(built by warehouse_catalog.py, one DuckDB file per database) with the task's question only (no
external knowledge, no value index), and we check where the gold tables land. A sharded family or
release series (tables of one schema whose names differ only in digits and whose columns largely
agree, tools/search/families.py) counts as found when any of its members is returned, so a gold
list of 114 daily shards is one unit. Figures: all-gold@5/10/20/50, recall@10 of the gold units,
warm latency median/p95, the cold first call per database (fresh process state: catalog load plus
index, or cache load), a BM25 baseline in the same run (names and comments, one document per
table), broken down by database size and by the number of gold units.

Generalization is measured by database (`--folds`, benchmarks/folds.py): a hash of its name puts each
database in half 0 or 1, so a question's vocabulary is never on both sides. `--folds rules` runs every
rule of tools/search/rules.py switched off and at alternative settings (RULE_GRID); each fold's tune half
picks a setting per rule (all-gold@10, then @20; ties go to the rule off, then today's default), and a
setting replaces the default only when both folds pick it (`decide`), i.e. it held on the databases it
was not tuned on. `--folds semantic` does the same for the embedding fusion's weights. BM25 and the
weights before issue 19 ("current code") are measured in the same run. The even/odd task split
(`part`) is kept for comparison with older figures; it shares databases between its halves.

    .venv/bin/python benchmarks/warehouse_linking.py [--data ../shared/data/spider2-snow] [--workdir DIR]
        [--folds rules|semantic|all] [--embeddings on|off]

Prints a table and writes benchmarks/results/warehouse_linking.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from warehouse_catalog import DEFAULT_DATA, DEFAULT_WORKDIR, build_all  # noqa: E402

from flexsql.tools.search.ranking import SearchSchema  # noqa: E402

KS = (5, 10, 20, 50)

# The weights before issue 19 (the "current code" baseline): search_schema with these overrides ranks as
# it did then (the embedding model off; the join links are whatever tools/search/keys.py infers now).
CURRENT = {"semantic_weight": 0.0, "semantic_column_weight": 0.0, "semantic_pool": 0.0}

# Per rule of tools/search/rules.py (and the Params gates they read), the settings the folds choose
# among: "off" removes the rule, "default" is today's value, the others are alternatives a tune half
# may prefer. A rule is kept where, tuned on one half of the databases, it holds on the other.
RULE_GRID: dict[str, dict[str, dict[str, float]]] = {
    "boost_schemas": {"off": {"schema_boost": 0}, "0.3": {"schema_boost": 0.3}, "1.0": {"schema_boost": 1.0}},
    "inferred links (share_with_neighbours)": {
        "off": {"inferred_share": 0},
        "0.1": {"inferred_share": 0.1},
        "0.5": {"inferred_share": 0.5},
    },
    "match_dated_families": {
        "off": {"date_boost": 0, "date_only": 0},
        "half": {"date_boost": 0.15, "date_only": 0.25},
    },
    "lift_companions": {
        "off": {"companion_share": 0},
        "0.1": {"companion_share": 0.1},
        "0.5": {"companion_share": 0.5},
    },
    "lift_bridges": {
        "off": {"bridge_share": 0},
        "0.15": {"bridge_share": 0.15},
        "0.6": {"bridge_share": 0.6},
    },
    "cover_concepts": {"0.7": {"coverage_decay": 0.7}, "0.5": {"coverage_decay": 0.5}},
    "spread_twins": {"off": {"twin_decay": 1.0}, "0.5": {"twin_decay": 0.5}, "0.85": {"twin_decay": 0.85}},
    "twin gates": {
        "overlap0.8": {"twin_overlap": 0.8},
        "overlap0.95": {"twin_overlap": 0.95},
        "min4": {"twin_min_columns": 4},
        "min16": {"twin_min_columns": 16},
    },
    "prefix (acronyms)": {"off": {"prefix_weight": 0}, "0.3": {"prefix_weight": 0.3}},
    "synonyms (WordNet)": {"off": {"synonym_weight": 0, "broader_weight": 0, "narrower_weight": 0}},
    "companion/bridge gates": {
        "comp1": {"companion_sources": 1},
        "comp5": {"companion_sources": 5},
        "bridge5": {"bridge_top": 5},
        "bridge20": {"bridge_top": 20},
    },
    "inferred sources": {"src3": {"inferred_sources": 3}, "src10": {"inferred_sources": 10}},
}
SIZE_BANDS = ((0, 20, "<=20"), (21, 100, "21-100"), (101, 500, "101-500"), (501, 10**9, ">500"))


def _words(text: str | None) -> list[str]:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text or "")
    return [w for w in re.split(r"[^A-Za-z0-9]+", text.lower()) if w]


class CommentBM25:
    """Plain BM25 (k1=1.2, b=0.75), one document per table: its name, column names, table and column
    comments, split on case and underscores. No stemming, no stopwords, no families."""

    def __init__(self, catalog: Any) -> None:
        self.tables = catalog.tables
        self.docs = []
        for t in self.tables:
            words = _words(t.name) + _words(t.comment)
            for c in t.columns:
                words += _words(c.name) + _words(c.comment)
            self.docs.append(Counter(words))
        self.df = Counter(w for d in self.docs for w in d)
        self.avg = statistics.mean(sum(d.values()) for d in self.docs) if self.docs else 1.0
        self.lengths = [sum(d.values()) for d in self.docs]

    def search(self, question: str, k: int) -> list[str]:
        terms = _words(question)
        n = len(self.docs)
        scores = []
        for i, d in enumerate(self.docs):
            s = 0.0
            for term in terms:
                tf = d.get(term, 0)
                if tf:
                    idf = math.log(1 + (n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                    s += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.lengths[i] / self.avg))
            scores.append((s, i))
        scores.sort(key=lambda x: -x[0])
        return [self.tables[i].qualified for s, i in scores[:k] if s > 0]


def load_tasks(data: Path) -> list[dict[str, Any]]:
    gold = {}
    for line in (data / "gold-tables-open.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            gold[row["instance_id"]] = row["gold_tables"]
    tasks = []
    for n, line in enumerate((data / "spider2-snow-open.jsonl").read_text().splitlines()):
        if line.strip():
            row = json.loads(line)
            if row["instance_id"] in gold:
                row["gold"] = gold[row["instance_id"]]
                row["part"] = "tune" if n % 2 == 0 else "held-out"
                tasks.append(row)
    return tasks


def _band(n: int) -> str:
    return next(label for lo, hi, label in SIZE_BANDS if lo <= n <= hi)


def _gold_band(n: int) -> str:
    return str(n) if n < 5 else "5+"


def evaluate(
    tasks: list[dict[str, Any]],
    workdir: Path,
    limit: int,
    overrides: dict[str, float] | None = None,
    configs: dict[str, dict[str, float]] | None = None,
    embeddings: bool = True,
) -> dict[str, Any]:
    """Ranks of every task's gold units under the default weights (with `overrides`), and under each
    of `configs` (query-time weight overrides) in the same pass; the index is built once per database."""
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.search import semantic
    from flexsql.tools.search.families import family_units
    from flexsql.tools.search.ranking import search_schema

    by_db: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in tasks:
        by_db[t["db_id"]].append(t)
    rows: list[dict[str, Any]] = []
    cold: dict[str, dict[str, Any]] = {}
    for db, db_tasks in sorted(by_db.items()):
        path = workdir / f"wh_{db}.duckdb"
        if not path.exists():
            continue
        source = open_source(f"duckdb:///{path}", name=db.lower())
        ctx = ToolContext(sources=SourceRegistry([source]))
        started = time.perf_counter()
        search_schema(ctx, SearchSchema(query=db_tasks[0]["instruction"][:2000], limit=limit))
        cold_s = time.perf_counter() - started
        engine = ctx.caches[f"search:{source.name}"]
        base_params = engine.params
        if overrides:  # query-time weights only (the index is built with the defaults)
            engine.params = base_params = dataclasses.replace(engine.params, **_typed(base_params, overrides))
        vectors_s = None
        if embeddings:
            started = time.perf_counter()
            vectors = semantic.attach(engine, wait=True, columns=True)
            vectors_s = round(time.perf_counter() - started, 2) if vectors is not None else None
        catalog = source.catalog()
        unit_of = family_units(catalog.tables)  # qualified (lower) -> unit key
        n_tables = len(catalog.tables)
        cold[db] = {
            "tables": n_tables,
            "columns": sum(len(t.columns) for t in catalog.tables),
            "cold_first_call_s": round(cold_s, 3),
            "embeddings_ready_s": vectors_s,
        }
        bm25 = CommentBM25(catalog)
        for task in db_tasks:
            gold = {g.split(".", 1)[1].lower() for g in task["gold"]}
            missing = {g for g in gold if g not in unit_of}
            units = {unit_of.get(g, g) for g in gold}
            question = task["instruction"][:2000]
            engine.params = base_params
            t0 = time.perf_counter()
            result = search_schema(ctx, SearchSchema(query=question, limit=limit))
            ms = (time.perf_counter() - t0) * 1000
            got = [unit_of.get(h.table.lower(), h.table.lower()) for h in result.tables]
            base = [unit_of.get(q.lower(), q.lower()) for q in bm25.search(question, limit)]
            by_config: dict[str, list[int | None]] = {}
            for name, config in (configs or {}).items():
                engine.params = dataclasses.replace(base_params, **_typed(base_params, config))
                other = search_schema(ctx, SearchSchema(query=question, limit=limit))
                by_config[name] = _ranks(
                    units, [unit_of.get(h.table.lower(), h.table.lower()) for h in other.tables]
                )
            engine.params = base_params
            rows.append(
                {
                    "id": task["instance_id"],
                    "db": db,
                    "part": task["part"],
                    "tables": n_tables,
                    "units": len(units),
                    "missing_from_catalog": len(missing),
                    "ms": ms,
                    "ranks": _ranks(units, got),
                    "bm25_ranks": _ranks(units, base),
                    "configs": by_config,
                    "question": question[:300],
                    "gold_units": sorted(units),
                    "top10": got[:10],
                }
            )
        source.close()
    return {"rows": rows, "cold": cold}


def _typed(base: Any, values: dict[str, float]) -> dict[str, Any]:
    """Overrides cast to the types of the Params fields they set (ints stay ints)."""
    return {k: type(getattr(base, k))(v) for k, v in values.items()}


def _ranks(units: set[str], got: list[str]) -> list[int | None]:
    first: dict[str, int] = {}
    for i, u in enumerate(got):
        first.setdefault(u, i + 1)
    return [first.get(u) for u in sorted(units)]


def _summary(rows: list[dict[str, Any]], key: str = "ranks") -> dict[str, Any]:
    if not rows:
        return {"tasks": 0}
    out: dict[str, Any] = {"tasks": len(rows)}
    for k in KS:
        out[f"all@{k}"] = round(
            sum(all(r is not None and r <= k for r in row[key]) for row in rows) / len(rows), 4
        )
    recall = [sum(r is not None and r <= 10 for r in row[key]) / len(row[key]) for row in rows]
    out["recall@10"] = round(statistics.mean(recall), 4)
    return out


def report(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    ms = sorted(r["ms"] for r in rows)
    cold = sorted(result["cold"].values(), key=lambda c: -c["columns"])
    rep: dict[str, Any] = {
        "tasks": len(rows),
        "databases": len(result["cold"]),
        "search_schema": _summary(rows),
        "bm25": _summary(rows, "bm25_ranks"),
        "by_part": {
            p: {
                "search_schema": _summary([r for r in rows if r["part"] == p]),
                "bm25": _summary([r for r in rows if r["part"] == p], "bm25_ranks"),
            }
            for p in ("tune", "held-out")
        },
        "by_db_size": {},
        "by_gold_units": {},
        "warm_ms": {
            "median": round(statistics.median(ms), 2),
            "p95": round(ms[int(0.95 * (len(ms) - 1))], 2),
        },
        "cold_first_call_s": {
            "largest_db": cold[0] if cold else None,
            "max": max((c["cold_first_call_s"] for c in cold), default=None),
            "per_db": result["cold"],
        },
        "gold_tables_missing_from_catalog": sum(r["missing_from_catalog"] for r in rows),
    }
    for _, _, label in SIZE_BANDS:
        part = [r for r in rows if _band(r["tables"]) == label]
        if part:
            rep["by_db_size"][label] = {"search_schema": _summary(part), "bm25": _summary(part, "bm25_ranks")}
    for label in ("1", "2", "3", "4", "5+"):
        part = [r for r in rows if _gold_band(r["units"]) == label]
        if part:
            rep["by_gold_units"][label] = {
                "search_schema": _summary(part),
                "bm25": _summary(part, "bm25_ranks"),
            }
    rep["failures@10"] = [
        {k: r[k] for k in ("id", "db", "question", "gold_units", "ranks", "top10")}
        for r in rows
        if not all(x is not None and x <= 10 for x in r["ranks"])
    ]
    return rep


def print_report(rep: dict[str, Any]) -> None:
    def line(label: str, s: dict[str, Any]) -> str:
        return (
            f"{label:<28} {s['tasks']:>4} | "
            + "  ".join(f"{s[f'all@{k}']:.3f}" for k in KS)
            + f" | {s['recall@10']:.3f}"
        )

    print(f"{rep['tasks']} tasks on {rep['databases']} databases (question only, no value index)")
    header = f"{'':<28} {'n':>4} | all@5  all@10 all@20 all@50 | rec@10"
    print(header)
    print("-" * len(header))
    print(line("search_schema", rep["search_schema"]))
    print(line("bm25 (names+comments)", rep["bm25"]))
    for part, r in rep["by_part"].items():
        print(line(f"  {part}: search_schema", r["search_schema"]))
        print(line(f"  {part}: bm25", r["bm25"]))
    for label, r in rep["by_db_size"].items():
        print(
            line(f"  db {label} tables", r["search_schema"]) + f"   (bm25 all@10 {r['bm25']['all@10']:.3f})"
        )
    for label, r in rep["by_gold_units"].items():
        print(
            line(f"  {label} gold units", r["search_schema"]) + f"   (bm25 all@10 {r['bm25']['all@10']:.3f})"
        )
    largest = rep["cold_first_call_s"]["largest_db"]
    print(
        f"warm latency median {rep['warm_ms']['median']} ms, p95 {rep['warm_ms']['p95']} ms; cold first call max "
        f"{rep['cold_first_call_s']['max']} s, on the largest database ({largest['columns']} columns) "
        f"{largest['cold_first_call_s']} s"
    )
    print(
        f"gold tables absent from the built catalog (no columns known in the data): "
        f"{rep['gold_tables_missing_from_catalog']}"
    )


def keep_embeddings(workdir: Path) -> None:
    """The embedding store (vectors of table and column texts) outlives the per-run cache dir: a
    benchmark re-run encodes only what changed. It holds no search state, so cold calls stay cold."""
    from flexsql.paths import cache_dir

    store = workdir / "embeddings-store"
    store.mkdir(parents=True, exist_ok=True)
    link = cache_dir() / "embeddings"
    if not link.exists():
        link.symlink_to(store, target_is_directory=True)


def _synonyms(mode: str) -> dict[str, Any]:
    """Switch the WordNet expansion on or off for this run; on: build its index first (once per
    machine, outside the per-database cold call) and say how long that took."""
    from flexsql.tools.search.synonyms import ENV, wordnet, wordnet_dir

    if mode == "off":
        os.environ[ENV] = "off"
        return {"mode": "off"}
    folder = wordnet_dir()
    if folder is None:
        print(
            "synonyms: no WordNet files (apt-get install wordnet-base, or FLEXSQL_WORDNET_DIR); running without"
        )
        return {"mode": "on", "wordnet": None}
    started = time.perf_counter()
    wn = wordnet(wait=True)
    took = round(time.perf_counter() - started, 2)
    print(f"synonyms: WordNet from {folder}, index {wn.path if wn else 'unavailable'} ready in {took} s")
    return {"mode": "on", "wordnet": str(folder), "index_ready_s": took}


def _fusion(t: float, c: float = 0.0, **more: float) -> dict[str, float]:
    return {"semantic_weight": t, "semantic_column_weight": c, "semantic_pool": 0, **more}


# The fusions a --folds run compares (an earlier grid over t in 0..3, c in 0..2, pool 0/30 chose t1 c0,
# and further fusions tried and dropped are listed in Params). q256: the question's vector from 256
# tokens rather than 64 (q96, q128, q48, q32: likewise).
SEMANTIC_GRID: dict[str, dict[str, float]] = {
    "t1.0 q256": _fusion(1.0, semantic_question_tokens=256),
    "t1.0 q128": _fusion(1.0, semantic_question_tokens=128),
    "t1.0 q96": _fusion(1.0, semantic_question_tokens=96),
    "t1.0 q48": _fusion(1.0, semantic_question_tokens=48),
    "t1.0 q32": _fusion(1.0, semantic_question_tokens=32),
    "t1.0": _fusion(1.0),
    "t1.5": _fusion(1.5),
    "t2.0": _fusion(2.0),
    "t1.0c0.5": _fusion(1.0, 0.5),
    "t2.0c1.0": _fusion(2.0, 1.0),
}


def fold_configs(
    grid: str, only: str | None = None
) -> tuple[dict[str, dict[str, float]], dict[str, list[str]]]:
    """The configurations a --folds run evaluates, and the groups the tune half chooses within."""
    configs: dict[str, dict[str, float]] = {"current code": CURRENT}
    groups: dict[str, list[str]] = {}
    if grid in ("rules", "all"):
        for rule, options in RULE_GRID.items():
            names = ["search_schema"]
            for label, overrides in options.items():
                configs[f"{rule}: {label}"] = overrides
                names.append(f"{rule}: {label}")
            groups[rule] = names
    if grid in ("semantic", "all"):
        names = ["current code"]
        for label, overrides in SEMANTIC_GRID.items():
            if only and label not in only.split(","):
                continue
            configs[f"semantic {label}"] = overrides
            names.append(f"semantic {label}")
        groups["semantic fusion"] = names + ["search_schema"]
    return configs, groups


def _fold_hit(k: int) -> Any:
    def hit(row: dict[str, Any], config: str) -> bool:
        ranks = {"search_schema": row["ranks"], "bm25": row["bm25_ranks"]}.get(config) or row["configs"][
            config
        ]
        return all(r is not None and r <= k for r in ranks)

    return hit


def _preference(group: list[str]) -> list[str]:
    """A group's settings in the order ties are broken: the rule switched off first (a rule stays only
    where it measurably helps), then today's defaults, then the alternatives."""
    off = [n for n in group if n.endswith(": off")]
    return (
        off
        + [n for n in group if n == "search_schema"]
        + [n for n in group if n not in off and n != "search_schema"]
    )


def decide(folds: dict[str, Any], groups: dict[str, list[str]]) -> dict[str, Any]:
    """Per group, each fold's tune half picks a setting by all-gold@10 (then @20, then the preference
    order); the setting is adopted only when both folds pick it, so it held on the half it was not
    tuned on; otherwise today's default stays. Returns per group both picks, their check figures beside
    the default's, and the verdict."""
    f10, f20 = folds["all@10"]["folds"], folds["all@20"]["folds"]
    out: dict[str, Any] = {}
    for group, options in groups.items():
        order = _preference(list(options))
        picks = []
        for fi in (0, 1):

            def key(name: str, fi: int = fi, order: list[str] = order) -> tuple[float, float, int]:
                return (
                    f10[fi]["configs"][name]["tune"] or 0.0,
                    f20[fi]["configs"][name]["tune"] or 0.0,
                    -order.index(name),
                )

            best = max(order, key=key)
            picks.append(
                {
                    "pick": best,
                    "tune": f10[fi]["configs"][best]["tune"],
                    "check": f10[fi]["configs"][best]["check"],
                    "default_check": f10[fi]["configs"]["search_schema"]["check"],
                }
            )
        same = picks[0]["pick"] == picks[1]["pick"]
        verdict = picks[0]["pick"] if same else "search_schema"
        out[group] = {"folds": picks, "verdict": verdict, "held": same}
    return out


def print_decisions(decisions: dict[str, Any]) -> None:
    print(f"{'rule':<40} {'fold 1 pick: check (default)':>36} {'fold 2 pick: check (default)':>36}  verdict")
    for group, d in decisions.items():
        cells = [
            f"{f['pick'].split(': ')[-1][:14]:>14}: {f['check']:.3f} ({f['default_check']:.3f})"
            for f in d["folds"]
        ]
        verdict = d["verdict"].split(": ")[-1] if d["verdict"] != "search_schema" else "default"
        print(f"{group:<40} {cells[0]:>36} {cells[1]:>36}  {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--only", help="comma-separated database names")
    parser.add_argument("--params", help="query-time weight overrides, e.g. coverage_decay=1,date_only=0.3")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "warehouse_linking.json")
    parser.add_argument(
        "--synonyms",
        choices=("on", "off"),
        default="on",
        help="WordNet expansion of question words (on: where WordNet is installed)",
    )
    parser.add_argument(
        "--folds",
        choices=("rules", "semantic", "all", "baselines"),
        help="two folds by database (benchmarks/folds.py): every rule with and without it and its "
        "alternatives (rules), the embedding fusion's weights (semantic), or both, with BM25 and the "
        "current code as baselines",
    )
    parser.add_argument("--embeddings", choices=("on", "off"), default="on", help="the embedding model")
    parser.add_argument("--grid", help="with --folds semantic: only these fusions (labels, comma-separated)")
    args = parser.parse_args(argv)
    if args.embeddings == "off":
        os.environ["FLEXSQL_EMBEDDINGS"] = "off"
    # the cold call must not find a search index cached by an earlier run
    os.environ.setdefault("FLEXSQL_CACHE_DIR", str(args.workdir / f"cache-{os.getpid()}"))
    keep_embeddings(args.workdir)
    synonyms = _synonyms(args.synonyms)
    only = set(args.only.split(",")) if args.only else None
    build_all(args.data, args.workdir, only)
    tasks = [t for t in load_tasks(args.data) if not only or t["db_id"] in only]
    overrides = (
        {k: float(v) for k, v in (kv.split("=") for kv in args.params.split(","))} if args.params else None
    )
    configs, groups = fold_configs(args.folds, args.grid) if args.folds else ({}, {})
    result = evaluate(tasks, args.workdir, args.limit, overrides, configs, embeddings=args.embeddings == "on")
    rep = report(result)
    rep["synonyms"] = synonyms
    print_report(rep)
    if args.folds:
        from folds import fold_report, print_folds

        names = ["bm25", "current code", "search_schema", *[c for c in configs if c != "current code"]]
        rep["folds"] = {}
        for k in (10, 20):
            rep["folds"][f"all@{k}"] = fold_report(result["rows"], names, groups, _fold_hit(k))
        print_folds(rep["folds"]["all@10"], "all-gold@10", ["bm25", "current code"], groups)
        if groups:
            rep["decisions"] = decide(rep["folds"], groups)
            print_decisions(rep["decisions"])
        rep["rows"] = [
            {k: r[k] for k in ("id", "db", "ranks", "bm25_ranks", "configs")} for r in result["rows"]
        ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rep, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
