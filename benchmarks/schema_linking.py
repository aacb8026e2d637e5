"""Schema linking on Spider: does search_schema put a question's gold tables (and columns) in its top K?

One DuckDB catalog holds every Spider database as its own schema (142 schemas, ~720 tables), and
every question is searched over the WHOLE catalog: the hard setting, where a question that names no
database competes with 141 others. The `per-db` rankers search each question in its own database only
(its SQLite file opened as a source), the setting of Spider-Syn and of an agent given its database. Questions: a fixed
sample of 1,000 from train.json (seed 0) and all of dev_open.json. Gold tables and columns come from
the gold SQL (sqlglot, SQLite dialect). A plain BM25 over identifiers (table name + column names,
split on case and underscores) is measured in the same run as the baseline.

    /work/venv/bin/python benchmarks/schema_linking.py [--data ../shared/data/spider] [--workdir DIR]

Prints a table and writes benchmarks/results/schema_linking.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from flexsql.tools.search.ranking import SearchSchema

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "spider"
KS = (5, 10, 20)


from spider_catalog import build_spider_catalog, catalog_stamp  # noqa: E402
from spider_gold import (  # noqa: E402
    SAMPLE_SEED,
    SAMPLE_SIZE,
    gold_links,
    load_questions,
    split_identifier,
    sqlite_schema,
)

# -- the baseline: plain BM25 over identifiers --------------------------------------------------------


class PlainBM25:
    """BM25 (k1=1.2, b=0.75) with one document per table: its name and its column names (and, with
    `schema_names`, its schema's name), split on case and underscores; with `stopwords`, English
    stopwords leave the question. No stemming, no expansion, no values, no reinforcement."""

    def __init__(self, catalog: Any, schema_names: bool = False, stopwords: bool = False) -> None:
        from flexsql.tools.search.text import STOPWORDS

        self.stopwords = STOPWORDS if stopwords else frozenset()
        self.tables = catalog.tables
        self.docs: list[Counter] = []
        self.columns: list[tuple[int, str, Counter]] = []
        for i, t in enumerate(self.tables):
            words = split_identifier(t.name) + (split_identifier(t.schema_name) if schema_names else [])
            for c in t.columns:
                words += split_identifier(c.name)
                self.columns.append((i, c.name, Counter(split_identifier(c.name) + split_identifier(t.name))))
            self.docs.append(Counter(words))
        self.df = Counter(w for d in self.docs for w in d)
        self.cdf = Counter(w for _, _, d in self.columns for w in d)
        self.avg = statistics.mean(sum(d.values()) for d in self.docs)
        self.cavg = statistics.mean(sum(d.values()) for _, _, d in self.columns)

    @staticmethod
    def _bm25(doc: Counter, terms: list[str], df: Counter, n: int, avg: float) -> float:
        size = sum(doc.values())
        score = 0.0
        for term in terms:
            tf = doc.get(term, 0)
            if tf:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * size / avg))
        return score

    def search(self, question: str, k: int, db: str = "") -> tuple[list[str], list[tuple[str, str]]]:
        terms = [w for w in re.findall(r"[a-z0-9]+", question.lower()) if w not in self.stopwords]
        scored = [
            (self._bm25(d, terms, self.df, len(self.docs), self.avg), i) for i, d in enumerate(self.docs)
        ]
        scored.sort(key=lambda x: -x[0])
        tables = [self.tables[i].qualified for s, i in scored[:k]]
        cscored = [
            (self._bm25(d, terms, self.cdf, len(self.columns), self.cavg), j)
            for j, (_, _, d) in enumerate(self.columns)
        ]
        cscored.sort(key=lambda x: -x[0])
        columns = [(self.tables[self.columns[j][0]].qualified, self.columns[j][1]) for s, j in cscored[:k]]
        return tables, columns


class PerDatabase:
    """Each question searched in its own database only, opened as a source of its own on the Spider
    SQLite file (how a user points flexsql at one database; Spider-Syn's setting). Results are named
    `db.table` like the whole-catalog ones."""

    def __init__(self, databases: Path, ranker: str, values: bool, params: Any = None) -> None:
        self.databases, self.ranker, self.values, self.params = databases, ranker, values, params
        self._open: dict[str, Any] = {}

    def _searcher(self, db: str) -> Any:
        from flexsql.tools.engines import SourceRegistry, open_source
        from flexsql.tools.runtime.context import ToolContext
        from flexsql.tools.search.index import SearchIndex
        from flexsql.tools.values.find import build_value_index

        if db not in self._open:
            source = open_source(f"sqlite:///{self.databases / db / f'{db}.sqlite'}", name=db)
            if self.ranker == "bm25":
                self._open[db] = PlainBM25(source.catalog(), schema_names=True, stopwords=True)
            else:
                ctx = ToolContext(sources=SourceRegistry([source]))
                if self.values:
                    build_value_index(ctx)
                ctx.caches[f"search:{source.name}"] = SearchIndex(source.catalog(), self.params)
                self._open[db] = ctx
        return self._open[db]

    def search(self, question: str, k: int, db: str) -> tuple[list[str], list[tuple[str, str]]]:
        from flexsql.tools.search.ranking import search_schema

        found = self._searcher(db)
        if isinstance(found, PlainBM25):
            tables, columns = found.search(question, k)
        else:
            result = search_schema(found, SearchSchema(query=question, limit=k))
            tables, columns = [t.table for t in result.tables], [(c.table, c.column) for c in result.columns]
        name = lambda t: f"{db}.{t.rsplit('.', 1)[-1]}"  # noqa: E731
        return [name(t) for t in tables], [(name(t), c) for t, c in columns]


# -- running ------------------------------------------------------------------------------------------


def evaluate(questions: list[dict[str, Any]], searcher: Any, databases: Path, max_k: int) -> dict[str, Any]:
    """Recall@K of the full gold set (all gold tables / all gold columns in the top K)."""
    schemas: dict[str, dict[str, dict[str, str]]] = {}
    hits_t = {k: 0 for k in KS}
    hits_c = {k: 0 for k in KS}
    n_t = n_c = 0
    times: list[float] = []
    failures: list[dict[str, Any]] = []
    for q in questions:
        db = q["db_id"]
        if db not in schemas:
            schemas[db] = sqlite_schema(databases, db)
        gold_t, gold_c = gold_links(q["query"], schemas[db])
        if not gold_t:
            continue
        started = time.perf_counter()
        tables, columns = searcher(q["question"], max_k, db)
        times.append((time.perf_counter() - started) * 1000)
        got_t = [t.lower() for t in tables]
        got_c = [(t.lower(), c.lower()) for t, c in columns]
        want_t = {f"{db}.{t}".lower() for t in gold_t}
        want_c = {(f"{db}.{t}".lower(), c) for t, c in gold_c}
        n_t += 1
        for k in KS:
            if want_t <= set(got_t[:k]):
                hits_t[k] += 1
        if not want_t <= set(got_t[:10]) and len(failures) < 400:
            failures.append(
                {"db": db, "question": q["question"], "gold": sorted(want_t), "top10": got_t[:10]}
            )
        if want_c:
            n_c += 1
            for k in KS:
                if want_c <= set(got_c[:k]):
                    hits_c[k] += 1
    return {
        "questions": n_t,
        "tables": {f"top{k}": round(hits_t[k] / n_t, 4) for k in KS},
        "columns_questions": n_c,
        "columns": {f"top{k}": round(hits_c[k] / max(n_c, 1), 4) for k in KS},
        "median_ms": round(statistics.median(times), 2) if times else None,
        "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))], 2) if times else None,
        "failures": failures,
    }


def fold_rows(
    questions: list[dict[str, Any]],
    searchers: dict[str, Any],
    databases: Path,
    k: int = 10,
) -> list[dict[str, Any]]:
    """Per question: its database and, per searcher, whether all its gold tables are in the top k."""
    schemas: dict[str, dict[str, dict[str, str]]] = {}
    rows = []
    for q in questions:
        db = q["db_id"]
        if db not in schemas:
            schemas[db] = sqlite_schema(databases, db)
        gold_t, _ = gold_links(q["query"], schemas[db])
        if not gold_t:
            continue
        want = {f"{db}.{t}".lower() for t in gold_t}
        hits = {}
        for name, search in searchers.items():
            tables, _ = search(q["question"], k, db)
            hits[name] = want <= {t.lower() for t in tables[:k]}
        rows.append({"db": db, "configs": hits})
    return rows


def _params(text: str | None) -> Any:
    import dataclasses

    from flexsql.tools.search.index import Params

    if not text:
        return None
    base = Params()
    values = {}
    for kv in text.split(","):
        key, value = kv.split("=")
        values[key] = type(getattr(base, key))(float(value))
    return dataclasses.replace(base, **values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "flexsql-bench")
    parser.add_argument("--no-values", action="store_true", help="search without the value index")
    parser.add_argument(
        "--sets",
        default="train-1000,dev_open,syn-orig,syn-train",
        help="syn-train: the paraphrased questions; syn-orig: the same questions unchanged",
    )
    parser.add_argument(
        "--params", help="search_schema weight overrides, e.g. prefix_weight=0,inferred_share=0"
    )
    parser.add_argument("--failures", type=Path, help="write the misses (top-10) of search_schema here")
    parser.add_argument(
        "--ablations", action="store_true", help="also rank without value hits, schema boost, FKs"
    )
    parser.add_argument(
        "--folds",
        action="store_true",
        help="two folds by database (benchmarks/folds.py) over the embedding fusion's weights, with the "
        "BM25 baselines and the current code in the same run",
    )
    parser.add_argument("--embeddings", choices=("on", "off"), default="on", help="the embedding model")
    parser.add_argument("--grid", help="with --folds: only these fusion weightings (labels, comma-separated)")
    parser.add_argument(
        "--synonyms",
        choices=("on", "off"),
        default="on",
        help="WordNet expansion of question words (on: where WordNet is installed)",
    )
    args = parser.parse_args(argv)
    if args.embeddings == "off":
        os.environ["FLEXSQL_EMBEDDINGS"] = "off"

    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext
    from flexsql.tools.search.index import Params, SearchIndex
    from flexsql.tools.search.ranking import search_schema
    from flexsql.tools.values.find import build_value_index

    databases = args.data / "databases"
    started = time.perf_counter()
    path = build_spider_catalog(databases, args.workdir / f"spider-{catalog_stamp(databases)}.duckdb")
    build_s = time.perf_counter() - started
    os.environ.setdefault("FLEXSQL_CACHE_DIR", str(args.workdir / "cache"))
    from warehouse_linking import CURRENT, SEMANTIC_GRID, _synonyms, keep_embeddings

    keep_embeddings(args.workdir)

    synonyms = _synonyms(args.synonyms)
    source = open_source(f"duckdb:///{path}", name="spider")
    ctx = ToolContext(sources=SourceRegistry([source]))
    catalog = source.catalog()
    index_s = None
    if not args.no_values:
        started = time.perf_counter()
        stats = build_value_index(ctx)
        index_s = time.perf_counter() - started
        print(f"value index: {stats.to_text()} ({index_s:.1f} s)")

    from flexsql.tools.search import semantic

    def ranker(params: Params | None = None) -> Any:
        index = SearchIndex(catalog, params)
        if args.embeddings == "on":
            semantic.attach(index, wait=True, columns=True)

        def run(question: str, k: int, db: str = "") -> tuple[list[str], list[tuple[str, str]]]:
            ctx.caches[f"search:{source.name}"] = index
            result = search_schema(ctx, SearchSchema(query=question, limit=k))
            return [t.table for t in result.tables], [(c.table, c.column) for c in result.columns]

        return run

    rankers: dict[str, Any] = {
        "bm25 plain": PlainBM25(catalog).search,
        "bm25 +schema,stop": PlainBM25(catalog, schema_names=True, stopwords=True).search,
        "search_schema": ranker(_params(args.params)),
        "per-db bm25": PerDatabase(databases, "bm25", values=False).search,
        "per-db search": PerDatabase(
            databases, "search_schema", values=not args.no_values, params=_params(args.params)
        ).search,
    }
    if args.ablations:
        rankers["- value hits"] = ranker(Params(value_weight=0.0, column_value_weight=0.0))
        rankers["- schema boost"] = ranker(Params(schema_boost=0.0))
        rankers["- FK neighbours"] = ranker(Params(fk_share=0.0, join_weight=0.0))
    ranker()("warm up", 20)
    report: dict[str, Any] = {
        "catalog": {
            "schemas": len(catalog.schemas()),
            "tables": len(catalog.tables),
            "columns": sum(len(t.columns) for t in catalog.tables),
            "copy_seconds": round(build_s, 1),
        },
        "value_index_seconds": round(index_s, 1) if index_s is not None else None,
        "sample": {"size": SAMPLE_SIZE, "seed": SAMPLE_SEED},
        "synonyms": synonyms,
        "sets": {},
    }
    questions = load_questions(args.data)
    if args.folds:
        return run_folds(args, questions, catalog, databases, ranker, CURRENT, SEMANTIC_GRID)
    all_failures = {}
    for name in args.sets.split(","):
        report["sets"][name] = {}
        for label, search in rankers.items():
            result = evaluate(questions[name], search, databases, max(KS))
            failures = result.pop("failures")
            if label == "search_schema":
                all_failures[name] = failures
            report["sets"][name][label] = result

    print(
        f"catalog: {report['catalog']['schemas']} schemas, {report['catalog']['tables']} tables, "
        f"{report['catalog']['columns']} columns; whole-catalog scope, except the per-db rankers: each question "
        "in its own database, opened as a SQLite source"
    )
    header = f"{'set':<11} {'ranker':<18} {'n':>5} | tables @5  @10  @20 | columns @5  @10  @20 | median ms"
    print(header)
    print("-" * len(header))
    for name, res in report["sets"].items():
        for ranker, r in res.items():
            t, c = r["tables"], r["columns"]
            print(
                f"{name:<11} {ranker:<18} {r['questions']:>5} |       {t['top5']:.3f} {t['top10']:.3f} "
                f"{t['top20']:.3f} |        {c['top5']:.3f} {c['top10']:.3f} {c['top20']:.3f} | {r['median_ms']}"
            )
    syn = questions.get("syn-train", [])
    print(
        f"syn-train: {len(syn)} of the {SAMPLE_SIZE} sampled train questions name a schema word that has a "
        "synonym; syn-orig is the same questions unchanged. Examples:"
    )
    for q in syn[:3]:
        print(f"  {q['original']!r} -> {q['question']!r}")
    report["paraphrase_examples"] = [
        {"original": q["original"], "paraphrase": q["question"]} for q in syn[:20]
    ]
    out = HERE / "results" / "schema_linking.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    if args.failures:
        args.failures.write_text(json.dumps(all_failures, indent=2))
    print(f"wrote {out}")
    return 0


def run_folds(
    args: Any,
    questions: dict[str, list[dict[str, Any]]],
    catalog: Any,
    databases: Path,
    ranker: Any,
    current: dict[str, float],
    grid: dict[str, dict[str, float]],
) -> int:
    """Every set's questions under BM25, the current code, the defaults and each fusion weighting,
    reported per half of the databases (folds.py); the tune half picks the weighting."""
    import dataclasses

    from folds import fold_report, print_folds

    from flexsql.tools.search.index import Params

    def params(overrides: dict[str, float]) -> Params:
        base = Params()
        return dataclasses.replace(base, **{k: type(getattr(base, k))(v) for k, v in overrides.items()})

    searchers: dict[str, Any] = {
        "bm25 +schema,stop": PlainBM25(catalog, schema_names=True, stopwords=True).search,
        "current code": ranker(params(current)),
        "search_schema": ranker(None),
    }
    for label, overrides in grid.items():
        if args.grid and label not in args.grid.split(","):
            continue
        searchers[f"semantic {label}"] = ranker(params(overrides))
    groups = {
        "semantic fusion": [n for n in searchers if n.startswith(("semantic", "current", "search_schema"))]
    }
    report: dict[str, Any] = {"sets": {}}
    for name in args.sets.split(","):
        rows = fold_rows(questions[name], searchers, databases)
        rep = fold_report(rows, list(searchers), groups, lambda r, c: bool(r["configs"][c]))
        report["sets"][name] = rep
        print(f"== {name}")
        print_folds(rep, "all-gold@10, whole catalog", ["bm25 +schema,stop", "current code"], groups)
    out = HERE / "results" / "schema_linking_folds.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
