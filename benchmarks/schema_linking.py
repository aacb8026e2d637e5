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
import hashlib
import json
import math
import os
import random
import re
import sqlite3
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
SAMPLE_SIZE = 1000
SAMPLE_SEED = 0


# -- the catalog: every Spider database as one DuckDB schema --------------------------------------


def _duck_type(declared: str, kinds: Counter) -> str:
    """A DuckDB type that holds every value of a SQLite column (SQLite types are only hints)."""
    present = {k for k in kinds if k != "null"}
    if not present:
        decl = declared.lower()
        if "int" in decl:
            return "BIGINT"
        if any(w in decl for w in ("real", "floa", "doub", "num", "dec")):
            return "DOUBLE"
        return "VARCHAR"
    if present == {"integer"}:
        return "BIGINT"
    if present <= {"integer", "real"}:
        return "DOUBLE"
    return "VARCHAR"


def _convert(value: Any, duck_type: str) -> Any:
    if value is None:
        return None
    if duck_type == "VARCHAR":
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        return value if isinstance(value, str) else str(value)
    if duck_type == "DOUBLE":
        return float(value)
    return int(value)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def build_spider_catalog(databases: Path, target: Path) -> Path:
    """Copy every Spider SQLite database into one DuckDB file, a schema per database, with primary
    and foreign keys where the data allows them. Rebuilt only when missing."""
    import duckdb
    import pyarrow as pa

    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    if partial.exists():
        partial.unlink()
    conn = duckdb.connect(str(partial))
    arrow_types = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "VARCHAR": pa.string()}
    for db_dir in sorted(p for p in databases.iterdir() if p.is_dir()):
        db_file = db_dir / f"{db_dir.name}.sqlite"
        if not db_file.exists():
            continue
        schema = db_dir.name
        src = sqlite3.connect(str(db_file))
        src.text_factory = lambda b: b.decode("utf-8", errors="replace")
        conn.execute(f"CREATE SCHEMA {_q(schema)}")
        names = [
            r[0]
            for r in src.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        info: dict[str, dict[str, Any]] = {}
        for name in names:
            cols = list(src.execute(f"PRAGMA table_info({_q(name)})"))
            fks: dict[int, dict[str, Any]] = {}
            for fid, _seq, ref, frm, to, *_ in src.execute(f"PRAGMA foreign_key_list({_q(name)})"):
                fk = fks.setdefault(fid, {"ref": ref, "cols": [], "refcols": []})
                fk["cols"].append(frm)
                fk["refcols"].append(to)
            kinds = {
                c[1]: Counter(
                    dict(
                        src.execute(
                            f"SELECT typeof({_q(c[1])}), count(*) FROM {_q(name)} GROUP BY 1"
                        ).fetchall()
                    )
                )
                for c in cols
            }
            types = {c[1]: _duck_type(c[2] or "", kinds[c[1]]) for c in cols}
            rows = src.execute(f"SELECT * FROM {_q(name)}").fetchall()
            info[name] = {
                "cols": cols,
                "types": types,
                "rows": rows,
                "pk": [c[1] for c in sorted(cols, key=lambda c: c[5]) if c[5]],
                "fks": list(fks.values()),
            }
        by_lower = {n.lower(): n for n in names}
        created: dict[str, list[str]] = {}  # table -> its unique key columns (for FK targets)
        pending = list(names)
        # referenced tables first; cycles and bad references fall back to no foreign key
        for _round in range(len(names) + 1):
            progressed = False
            for name in list(pending):
                refs = {by_lower.get(fk["ref"].lower()) for fk in info[name]["fks"]} - {name, None}
                if any(r in pending for r in refs) and _round < len(names):
                    continue
                _create_table(conn, schema, name, info[name], created, by_lower, arrow_types, pa)
                pending.remove(name)
                progressed = True
            if not pending or not progressed:
                break
        for name in pending:
            _create_table(conn, schema, name, info[name], created, by_lower, arrow_types, pa)
        src.close()
    conn.execute("CHECKPOINT")
    conn.close()
    partial.rename(target)
    return target


def _create_table(
    conn: Any,
    schema: str,
    name: str,
    meta: dict[str, Any],
    created: dict[str, list[str]],
    by_lower: dict[str, str],
    arrow_types: dict[str, Any],
    pa: Any,
) -> None:
    cols = [c[1] for c in meta["cols"]]
    types = meta["types"]
    data = {c: [_convert(r[i], types[c]) for r in meta["rows"]] for i, c in enumerate(cols)}
    arrow = pa.table({c: pa.array(data[c], type=arrow_types[types[c]]) for c in cols}) if cols else None
    pk = meta["pk"]
    fk_clauses = []
    for fk in meta["fks"]:
        ref = by_lower.get(fk["ref"].lower())
        if ref is None or ref not in created or any(c not in cols for c in fk["cols"]):
            continue
        refcols = fk["refcols"] if all(fk["refcols"]) else created[ref]
        if [c.lower() for c in refcols] != [c.lower() for c in created[ref]]:
            continue  # DuckDB requires the referenced columns to be the target's key
        fk_clauses.append(
            f"FOREIGN KEY ({', '.join(map(_q, fk['cols']))}) REFERENCES {_q(schema)}.{_q(ref)} "
            f"({', '.join(map(_q, created[ref]))})"
        )
    table = f"{_q(schema)}.{_q(name)}"
    for use_pk, use_fk in ((True, True), (True, False), (False, False)):
        parts = [f"{_q(c)} {types[c]}" for c in cols]
        if use_pk and pk:
            parts.append(f"PRIMARY KEY ({', '.join(map(_q, pk))})")
        if use_fk:
            parts += fk_clauses
        try:
            conn.execute("BEGIN")
            conn.execute(f"CREATE TABLE {table} ({', '.join(parts)})")
            if arrow is not None and arrow.num_rows:
                conn.register("incoming", arrow)
                conn.execute(f"INSERT INTO {table} SELECT * FROM incoming")
                conn.unregister("incoming")
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            continue
        if use_pk and pk:
            created[name] = pk
        return
    raise RuntimeError(f"could not copy {schema}.{name}")


def catalog_stamp(databases: Path) -> str:
    """Names the built catalog after the input files, so changed data builds a new one."""
    files = sorted((p.name, p.stat().st_size) for p in databases.glob("*/*.sqlite"))
    return hashlib.sha256(repr(files).encode()).hexdigest()[:10]


# -- gold tables and columns from the gold SQL ------------------------------------------------------


def sqlite_schema(databases: Path, db_id: str) -> dict[str, dict[str, str]]:
    src = sqlite3.connect(str(databases / db_id / f"{db_id}.sqlite"))
    try:
        out: dict[str, dict[str, str]] = {}
        for (name,) in src.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        ):
            out[name] = {c[1]: (c[2] or "TEXT") for c in src.execute(f"PRAGMA table_info({_q(name)})")}
        return out
    finally:
        src.close()


def gold_links(sql: str, schema: dict[str, dict[str, str]]) -> tuple[set[str], set[tuple[str, str]]]:
    """The tables (lower-case names) and (table, column) pairs a gold query uses."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.optimizer.qualify import qualify

    tables_by_lower = {t.lower(): t for t in schema}
    tree = sqlglot.parse_one(sql, read="sqlite")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = {t.name.lower() for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes}
    tables = {t for t in tables if t in tables_by_lower}
    columns: set[tuple[str, str]] = set()
    try:
        lowered = {t.lower(): {c.lower(): ty for c, ty in cols.items()} for t, cols in schema.items()}
        qualified = qualify(
            tree.copy(),
            schema=lowered,
            dialect="sqlite",
            quote_identifiers=False,
            identify=False,
            validate_qualify_columns=False,
        )
        for select in qualified.find_all(exp.Select):
            aliases = {}
            for source in select.find_all(exp.Table):
                aliases[source.alias_or_name.lower()] = source.name.lower()
            for col in select.find_all(exp.Column):
                table = aliases.get(col.table.lower())
                if table in lowered and col.name.lower() in lowered[table]:
                    columns.add((table, col.name.lower()))
    except Exception:
        pass
    return tables, columns


# -- Spider-Syn-style paraphrases: schema words in the questions replaced by synonyms ----------------
#
# Written for this benchmark only (never imported by flexsql): a word is replaced when it names a table
# or column of the question's database (so the question no longer says the schema's word), as the
# Spider-Syn annotators did by hand. Keys are singular; a plural word gets the plural synonym.
PARAPHRASES: dict[str, str] = {
    "student": "pupil",
    "customer": "client",
    "employee": "worker",
    "department": "division",
    "city": "town",
    "player": "athlete",
    "member": "participant",
    "staff": "personnel",
    "document": "file",
    "course": "class",
    "age": "years of age",
    "price": "cost",
    "company": "firm",
    "product": "item",
    "phone": "telephone",
    "status": "state",
    "people": "persons",
    "description": "summary",
    "faculty": "teaching staff",
    "project": "undertaking",
    "account": "profile",
    "title": "heading",
    "track": "recording",
    "location": "place",
    "country": "nation",
    "club": "society",
    "party": "faction",
    "grade": "mark",
    "claim": "demand",
    "address": "residence",
    "card": "pass",
    "position": "post",
    "room": "chamber",
    "report": "account statement",
    "wine": "vintage",
    "email": "e-mail address",
    "apartment": "flat",
    "professor": "lecturer",
    "market": "marketplace",
    "population": "inhabitants",
    "hour": "hr",
    "artist": "performer",
    "rating": "evaluation",
    "point": "score",
    "instructor": "teacher",
    "team": "squad",
    "salary": "pay",
    "station": "depot",
    "role": "function",
    "school": "academy",
    "aircraft": "plane",
    "airport": "airfield",
    "branch": "office location",
    "organization": "organisation",
    "level": "tier",
    "balance": "funds",
    "sale": "selling",
    "vote": "ballot",
    "game": "match",
    "problem": "issue",
    "building": "edifice",
    "order": "purchase",
    "college": "university",
    "song": "tune",
    "shop": "store",
    "job": "occupation",
    "budget": "allocation",
    "catalog": "catalogue",
    "model": "version",
    "sex": "gender",
    "saving": "deposit",
    "payment": "remittance",
    "bank": "lender",
    "office": "bureau",
    "enzyme": "catalyst",
    "credit": "loan credit",
    "flight": "air trip",
    "gymnast": "tumbler",
    "category": "class type",
    "mountain": "peak",
    "competition": "contest",
    "host": "organizer",
    "policy": "insurance plan",
    "duration": "length",
    "route": "path",
    "book": "volume",
    "manager": "supervisor",
    "movie": "film",
    "film": "motion picture",
    "president": "head of state",
    "height": "stature",
    "author": "writer",
    "trip": "journey",
    "user": "account holder",
    "capacity": "maximum occupancy",
    "director": "filmmaker",
    "booking": "reservation",
    "race": "contest run",
    "record": "entry",
    "device": "gadget",
    "hotel": "inn",
    "music": "tunes",
    "result": "outcome",
    "institution": "establishment",
    "county": "shire",
    "election": "poll",
    "procedure": "operation",
    "color": "colour",
    "genre": "style",
    "follower": "fan",
    "bike": "bicycle",
    "musical": "stage show",
    "attraction": "sight",
    "invoice": "bill",
    "scientist": "researcher",
    "event": "occasion",
    "channel": "network",
    "pilot": "aviator",
    "singer": "vocalist",
    "concert": "gig",
    "stadium": "arena",
    "teacher": "educator",
    "driver": "motorist",
    "car": "automobile",
    "maker": "manufacturer",
    "dog": "canine",
    "owner": "proprietor",
    "treatment": "therapy",
    "battle": "fight",
    "ship": "vessel",
    "death": "fatality",
    "template": "blueprint",
    "paragraph": "passage",
    "museum": "gallery",
    "visitor": "guest",
    "visit": "trip to",
    "church": "chapel",
    "wedding": "marriage",
    "poker": "card game",
    "perpetrator": "offender",
    "election_result": "poll outcome",
    "conductor": "maestro",
    "orchestra": "ensemble",
    "performance": "show",
    "festival": "fair",
    "architect": "designer",
    "bridge": "span",
    "mill": "factory",
    "match": "fixture",
    "airline": "carrier",
    "employment": "work contract",
    "storm": "hurricane",
    "region": "area",
    "church_name": "chapel name",
    "tv": "television",
    "cartoon": "animated show",
    "series": "show",
    "episode": "installment",
    "guest": "visitor",
    "candidate": "nominee",
    "representative": "delegate",
    "actor": "performer",
    "cinema": "movie theater",
    "club_name": "society name",
    "restaurant": "eatery",
    "dorm": "dormitory",
    "transaction": "deal",
    "shipment": "consignment",
    "supplier": "vendor",
    "appointment": "meeting",
    "patient": "sick person",
    "physician": "doctor",
    "nurse": "caregiver",
    "medication": "drug",
    "department_name": "division name",
    "musician": "player",
    "band": "group",
    "album": "record",
    "instrument": "device for music",
    "venue": "site",
    "tourist": "traveller",
    "injury": "harm",
    "browser": "web client",
    "accelerator": "booster",
    "product_name": "item name",
    "course_name": "class name",
    "first": "given",
    "last": "family",
    "gpa": "grade point average",
    "allergy": "sensitivity",
    "dept": "division",
}


def _plural(word: str) -> str:
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word  # already plural ('funds', 'tunes')
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def schema_words(schema: dict[str, dict[str, str]]) -> set[str]:
    """Lower-case words of a database's table and column names (split on case and underscores)."""
    out: set[str] = set()
    for table, cols in schema.items():
        out.update(_split_identifier(table))
        for col in cols:
            out.update(_split_identifier(col))
    return out


def paraphrase(question: str, words: set[str]) -> str | None:
    """The question with each word that names part of the schema (singular or plural) replaced by its
    synonym; None when no word was replaced."""
    changed = False

    def swap(m: re.Match[str]) -> str:
        nonlocal changed
        word = m.group(0)
        low = word.lower()
        singular, plural = low, False
        if low not in PARAPHRASES:
            for cut, add in (("ies", "y"), ("es", ""), ("s", "")):
                if low.endswith(cut) and low[: len(low) - len(cut)] + add in PARAPHRASES:
                    singular, plural = low[: len(low) - len(cut)] + add, True
                    break
        if singular not in PARAPHRASES or not ({singular, low} & words):
            return word
        changed = True
        synonym = PARAPHRASES[singular]
        if plural:
            head, _, tail = synonym.rpartition(" ")
            synonym = (head + " " if head else "") + _plural(tail)
        return synonym.capitalize() if word[0].isupper() else synonym

    out = re.sub(r"[A-Za-z]+", swap, question)
    return out if changed else None


def paraphrase_set(sample: list[dict[str, Any]], databases: Path) -> list[dict[str, Any]]:
    """The sample's questions that mention a schema word with a synonym, rewritten with the synonym."""
    words: dict[str, set[str]] = {}
    out = []
    for q in sample:
        db = q["db_id"]
        if db not in words:
            words[db] = schema_words(sqlite_schema(databases, db))
        text = paraphrase(q["question"], words[db])
        if text is not None:
            out.append({**q, "question": text, "original": q["question"]})
    return out


def load_questions(data: Path) -> dict[str, list[dict[str, Any]]]:
    train = json.loads((data / "train.json").read_text())
    rng = random.Random(SAMPLE_SEED)
    sample = rng.sample(train, SAMPLE_SIZE)
    dev = json.loads((data / "dev_open.json").read_text())
    syn = paraphrase_set(sample, data / "databases")
    originals = [{**q, "question": q["original"]} for q in syn]
    return {"train-1000": sample, "dev_open": dev, "syn-train": syn, "syn-orig": originals}


# -- the baseline: plain BM25 over identifiers --------------------------------------------------------


def _split_identifier(text: str) -> list[str]:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    return [w for w in re.split(r"[^A-Za-z0-9]+", text.lower()) if w]


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
            words = _split_identifier(t.name) + (_split_identifier(t.schema_name) if schema_names else [])
            for c in t.columns:
                words += _split_identifier(c.name)
                self.columns.append(
                    (i, c.name, Counter(_split_identifier(c.name) + _split_identifier(t.name)))
                )
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
        "--synonyms",
        choices=("on", "off"),
        default="on",
        help="WordNet expansion of question words (on: where WordNet is installed)",
    )
    args = parser.parse_args(argv)

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
    from warehouse_linking import _synonyms

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

    def ranker(params: Params | None = None) -> Any:
        index = SearchIndex(catalog, params)

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


if __name__ == "__main__":
    sys.exit(main())
