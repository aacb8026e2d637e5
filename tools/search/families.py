"""Sharded families and release series, and the dates a question names.

The grouping itself lives with the catalog (tools/engines/families.py), so that search, list_tables and
SQL name a family the same way; this module adds what search does with it.

Warehouses split one logical table into many: daily or yearly shards (`EVENTS_20210118`, `GSOD2016`),
releases (`CLINICAL_GDC_R24`, `…_R35`), survey vintages (`STATE_2018_5YR`). For search they are one
entry: tables of one schema whose names differ only in their digits and whose columns largely agree.
A question's dates ("January 18, 2023", "2016", "2011 to 2014") pick the member(s) to show.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from flexsql.tools.engines import TableInfo
from flexsql.tools.engines.families import Family, families, shape

_DIGITS = re.compile(r"\d+")

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ]
    )
}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MONTH = r"(january|february|march|april|may|june|july|august|september|sept|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|oct|nov|dec)"  # noqa: E501


def family_units(tables: Sequence[TableInfo]) -> dict[str, str]:
    """qualified name (lower) -> the unit it counts as: its family's pattern, or itself."""
    unit = {t.qualified.lower(): t.qualified.lower() for t in tables}
    for fam in families(tables):
        first = tables[fam.members[0]]
        key = ".".join(p for p in (first.database, first.schema_name, fam.pattern) if p).lower()
        for i in fam.members:
            unit[tables[i].qualified.lower()] = key
    return unit


# -- dates in questions ---------------------------------------------------------------------------


def question_dates(text: str) -> set[str]:
    """Digit strings a date-named shard could carry for the dates in the text: '2023', '23', '202301',
    '20230118' for "January 18, 2023"; every year of a range "2011 to 2014" / "2011-2014"."""
    low = text.lower()
    out: set[str] = set()

    def year(y: int) -> None:
        out.add(f"{y:04d}")
        out.add(f"{y % 100:02d}")

    for m in re.finditer(r"\b(19\d\d|20\d\d)\s*(?:-|–|to|through|until|and)\s*(19\d\d|20\d\d)\b", low):
        a, b = int(m.group(1)), int(m.group(2))
        if 0 < b - a <= 30:
            for y in range(a, b + 1):
                year(y)
    for m in re.finditer(r"\b(19\d\d|20\d\d)\b", low):
        year(int(m.group(1)))
    for m in re.finditer(r"\b(19\d\d|20\d\d)[-/.](\d{1,2})(?:[-/.](\d{1,2}))?\b", low):
        yr, mo = m.group(1), int(m.group(2))
        if 1 <= mo <= 12:
            out.add(f"{yr}{mo:02d}")
            if m.group(3) and 1 <= int(m.group(3)) <= 31:
                out.add(f"{yr}{mo:02d}{int(m.group(3)):02d}")
    for m in re.finditer(_MONTH + r"\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(19\d\d|20\d\d)\b", low):
        mo, d, yr = _MONTHS[m.group(1)], int(m.group(2)), m.group(3)
        out.add(f"{yr}{mo:02d}")
        if 1 <= d <= 31:
            out.add(f"{yr}{mo:02d}{d:02d}")
    for m in re.finditer(
        r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"\.?,?\s+(19\d\d|20\d\d)\b", low
    ):
        d, mo, yr = int(m.group(1)), _MONTHS[m.group(2)], m.group(3)
        out.add(f"{yr}{mo:02d}")
        if 1 <= d <= 31:
            out.add(f"{yr}{mo:02d}{d:02d}")
    for m in re.finditer(_MONTH + r"\.?\s+(?:of\s+)?(19\d\d|20\d\d)\b", low):
        out.add(f"{m.group(2)}{_MONTHS[m.group(1)]:02d}")
    return out


def date_members(names: Sequence[str], dates: set[str]) -> tuple[list[int], int]:
    """Positions of the names that carry one of the dates (the most specific match wins: a day over a
    year), and how many digits matched (8 for a day, 6 a month, 4 or 2 a year)."""
    if not dates:
        return [], 0
    best_len = 0
    hits: list[int] = []
    for i, name in enumerate(names):
        runs = _DIGITS.findall(name)
        matched = max((len(r) for r in runs if r in dates), default=0)
        if matched > best_len:
            best_len, hits = matched, [i]
        elif matched and matched == best_len:
            hits.append(i)
    return hits, best_len


__all__ = ["Family", "date_members", "families", "family_units", "question_dates", "shape"]
