"""What search_schema returns: ranked table and column hits, each saying why it matched."""

from __future__ import annotations

from pydantic import BaseModel

from flexsql.tools.engines.row_counts import estimate_note, rows_text
from flexsql.tools.runtime.registry import ToolResult
from flexsql.tools.runtime.render import TextBudget


class TableHit(BaseModel):
    table: str  # for a family: the member the question's dates name, else the latest
    score: float
    why: list[str]
    kind: str = "table"
    row_estimate: int | None = None
    rows_exact: bool = False  # counted; else row_estimate is the engine's estimate, from rows_from
    rows_from: str | None = None
    family: str | None = None  # as list_tables names it: NOAA_GSOD.GSOD*, or EVENTS_20180828-20181003
    family_size: int | None = None
    family_range: str | None = None  # first … last member
    family_reads_all: str | None = None  # for one column set of a split group: the pattern that reads all
    date_members: list[str] = []  # members named by the question's dates (up to 12)


class ColumnHit(BaseModel):
    table: str
    column: str
    type: str
    score: float
    why: list[str]


class SchemaSearchResult(ToolResult):
    query: str
    source: str
    tables: list[TableHit]
    columns: list[ColumnHit]
    tables_matched: int  # tables with any evidence at all
    truncated: bool
    value_index: str  # "used", "not built" (build it with find_values or build_value_index)
    elapsed_ms: float

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        lines = [
            f"search_schema {self.query!r} in {self.source}: {self.tables_matched} tables matched, "
            f"top {len(self.tables)}" + (" (truncated: true)" if self.truncated else "")
        ]
        for i, t in enumerate(self.tables, 1):
            rows = f", {rows_text(t.row_estimate, t.rows_exact)}" if t.row_estimate is not None else ""
            kind = " (view)" if t.kind == "view" else ""
            fam = ""
            if t.family:
                also = f"; {t.family_reads_all}" if t.family_reads_all else ""
                fam = f" (family {t.family}: {t.family_size} tables {t.family_range}{also})"
            lines.append(f"{i}. {t.table}{kind}{fam} [{t.score:.2f}{rows}] — " + "; ".join(t.why))
        note = estimate_note(
            [t.rows_from for t in self.tables if t.row_estimate is not None and not t.rows_exact]
        )
        if note:
            lines.append(note)
        if self.columns:
            lines.append("columns:")
            for c in self.columns:
                lines.append(f"- {c.table}.{c.column} ({c.type}) [{c.score:.2f}] — " + "; ".join(c.why))
        if self.value_index != "used":
            lines.append(
                f"(value index {self.value_index}: words that are data values, like 'France', are not "
                "matched yet; find_values builds it)"
            )
        return "\n".join(lines)
