"""Gold links of Spider questions (the tables and columns their gold SQL reads, via sqlglot) and the
question sets: a fixed train sample, dev_open, and schema-word paraphrases (Spider-Syn style)."""

from __future__ import annotations

import json
import random
import re
import sqlite3
from pathlib import Path
from typing import Any

from spider_catalog import quote_name

SAMPLE_SIZE = 1000
SAMPLE_SEED = 0


def split_identifier(text: str) -> list[str]:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    return [w for w in re.split(r"[^A-Za-z0-9]+", text.lower()) if w]


# -- gold tables and columns from the gold SQL ------------------------------------------------------


def sqlite_schema(databases: Path, db_id: str) -> dict[str, dict[str, str]]:
    src = sqlite3.connect(str(databases / db_id / f"{db_id}.sqlite"))
    try:
        out: dict[str, dict[str, str]] = {}
        for (name,) in src.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        ):
            out[name] = {
                c[1]: (c[2] or "TEXT") for c in src.execute(f"PRAGMA table_info({quote_name(name)})")
            }
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
        out.update(split_identifier(table))
        for col in cols:
            out.update(split_identifier(col))
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
