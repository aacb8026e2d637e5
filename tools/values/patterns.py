"""The shape of a column's values for profile_column: character-class patterns ('AA-9999') and the
kinds a text column turns out to hold (dates, numbers, emails, JSON stored as text)."""

from __future__ import annotations

import json
import re
from collections import Counter

from pydantic import BaseModel


class ValuePattern(BaseModel):
    pattern: str  # 9 digit, A upper, a lower; '+' a run of the previous class
    count: int
    example: str


def shape(value: str) -> str:
    """'AB-1234' -> 'AA-9999'; long or spaced values collapse runs: 'Alice Martin' -> 'Aa+ Aa+'."""
    classes = []
    for ch in value:
        if ch.isdigit():
            classes.append("9")
        elif ch.isalpha():
            classes.append("A" if ch.isupper() else "a")
        elif ch.isspace():
            classes.append(" ")
        else:
            classes.append(ch)
    if len(value) <= 12 and " " not in value:
        return "".join(classes)
    out: list[str] = []
    for c in classes:
        if out and (out[-1] == c or (out[-1] == "+" and len(out) > 1 and out[-2] == c)):
            if out[-1] != "+":
                out.append("+")
            continue
        out.append(c)
    text = "".join(out)
    return text if len(text) <= 40 else text[:39] + "…"


def value_patterns(values: list[tuple[str, int]], top: int = 5) -> list[ValuePattern]:
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for value, n in values:
        key = shape(value)
        counts[key] += n
        examples.setdefault(key, value)
    return [ValuePattern(pattern=p, count=c, example=examples[p]) for p, c in counts.most_common(top)]


_DATE = re.compile(
    r"^\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$|"
    r"^\d{1,2}[/.]\d{1,2}[/.]\d{2,4}( \d{1,2}:\d{2}(:\d{2})?)?$"
)
_TIME = re.compile(r"^\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
_URL = re.compile(r"^https?://", re.IGNORECASE)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_BOOL = {"true", "false", "yes", "no", "y", "n", "t", "f"}


def _kind_of(value: str) -> str | None:
    v = value.strip()
    if not v:
        return "empty string"
    if _DATE.match(v):
        return "date"
    if _TIME.match(v):
        return "time"
    if _UUID.match(v):
        return "uuid"
    if _EMAIL.match(v):
        return "email"
    if _URL.match(v):
        return "url"
    if v.lower() in _BOOL:
        return "boolean"
    try:
        float(v)
        return "number stored as text"
    except ValueError:
        pass
    if v[0] in "{[" and v[-1] in "}]":
        try:
            json.loads(v)
            return "json"
        except RecursionError:  # nested deeper than Python parses: JSON all the same
            return "json"
        except ValueError:
            return None
    return None


def looks_like(values: list[tuple[str, int]]) -> dict[str, float]:
    """Kinds that at least 20% of the (weighted) values share."""
    total = sum(n for _, n in values)
    if not total:
        return {}
    kinds: Counter[str] = Counter()
    for value, n in values:
        kind = _kind_of(value)
        if kind:
            kinds[kind] += n
    return {k: round(c / total, 3) for k, c in kinds.most_common() if c / total >= 0.2}
