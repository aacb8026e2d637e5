"""The gold and predicted results side by side, as the report shows them: rows and columns lined up
the way REX paired them (evals/rex.py), the first difference found, and a small window of rows
around it — bounded, so a report of a thousand tasks stays small.

The view is a JSON-ready dict kept in each results.jsonl line (`results`):

    {"ordered": bool, "gold_rows": int, "pred_rows": int | None, "error": str | None,
     "columns": [{"gold": name | None, "pred": name | None}, …],   # display columns
     "lines": [{"n": line, "g": gold row | None, "p": predicted row | None,
                "gv": [cell, …] | None, "pv": [cell, …] | None, "diff": [display column, …]}, …],
     "lines_total": int, "first": {"line": int | None, "column": int | None, "text": str} | None}

Display columns are the gold columns in order (with the predicted column paired with each), then the
predicted columns paired with none. A line is a gold row and the predicted row paired with it (in
order when the order is strict); predicted rows paired with no gold row come last. Cells are text
(NULL for a missing value), cut at CELL_CHARS."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flexsql.evals.rex import RexMatch
from flexsql.tools.sql.equivalence import CellComparer, normalize_value

LINES = 12  # rows shown
COLUMNS = 12  # display columns shown
CELL_CHARS = 60
_CMP = CellComparer(1e-9, 1e-9)


def cell_text(value: Any) -> str:
    v = normalize_value(value)
    if v is None:
        return "NULL"
    if isinstance(v, float):
        text = repr(round(v, 9))
    elif isinstance(v, bytes):
        text = "0x" + v.hex()
    else:
        text = str(v) if not hasattr(v, "denominator") or v.denominator == 1 else str(float(v))
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def side_by_side(
    gold_columns: Sequence[str],
    gold_rows: Sequence[Sequence[Any]],
    pred_columns: Sequence[str] | None,
    pred_rows: Sequence[Sequence[Any]] | None,
    match: RexMatch | None,
    *,
    error: str | None = None,
    ordered: bool = False,
) -> dict[str, Any]:
    """The view (see the module docstring). Without a prediction (`pred_rows` None) it shows the gold
    (`ordered`: whether its order counts) and the error."""
    m = len(gold_columns)
    ordered = match.ordered if match is not None else ordered
    if pred_rows is None or pred_columns is None or match is None:
        lines = [{"g": i, "p": None} for i in range(len(gold_rows))]
        columns = [{"gold": str(c), "pred": None} for c in gold_columns]
        shown = [
            _line(k, ln, gold_rows, None, list(range(m)), [None] * m) for k, ln in enumerate(lines[:LINES])
        ]
        return {
            "ordered": ordered,
            "gold_rows": len(gold_rows),
            "pred_rows": None,
            "error": error,
            "columns": columns[:COLUMNS],
            "lines": shown,
            "lines_total": len(lines),
            "first": {"line": None, "column": None, "text": error or "no predicted result"},
        }
    mapping = match.column_mapping
    extra = [s for s in range(len(pred_columns)) if s not in set(mapping.values())]
    gold_of_display: list[int | None] = [*range(m), *([None] * len(extra))]
    pred_of_display: list[int | None] = [*(mapping.get(g) for g in range(m)), *extra]
    columns = [
        {
            "gold": str(gold_columns[g]) if g is not None else None,
            "pred": str(pred_columns[s]) if s is not None else None,
        }
        for g, s in zip(gold_of_display, pred_of_display, strict=True)
    ]
    if ordered:
        pairs = [
            {"g": i if i < len(gold_rows) else None, "p": i if i < len(pred_rows) else None}
            for i in range(max(len(gold_rows), len(pred_rows)))
        ]
    else:
        paired = dict(match.row_pairs)
        used = set(paired.values())
        pairs = [{"g": i, "p": paired.get(i)} for i in range(len(gold_rows))]
        pairs += [{"g": None, "p": j} for j in range(len(pred_rows)) if j not in used]
    first_line: int | None = None
    first_column: int | None = None
    diffs: list[list[int]] = []
    for k, pair in enumerate(pairs):
        diff = _differences(pair, gold_rows, pred_rows, gold_of_display, pred_of_display)
        diffs.append(diff)
        if diff and first_line is None:
            first_line, first_column = k, diff[0]
    text = _first_text(
        first_line, first_column, pairs, gold_rows, pred_rows, columns, gold_of_display, pred_of_display
    )
    start = 0 if first_line is None else max(0, first_line - 2)
    window = range(start, min(len(pairs), start + LINES))
    shown = [
        {
            **_line(k, pairs[k], gold_rows, pred_rows, gold_of_display, pred_of_display),
            "diff": [c for c in diffs[k] if c < COLUMNS],
        }
        for k in window
    ]
    return {
        "ordered": ordered,
        "gold_rows": len(gold_rows),
        "pred_rows": len(pred_rows),
        "error": error,
        "columns": columns[:COLUMNS],
        "lines": shown,
        "lines_total": len(pairs),
        "first": None if text is None else {"line": first_line, "column": first_column, "text": text},
    }


def _line(
    k: int,
    pair: dict[str, int | None],
    gold_rows: Sequence[Sequence[Any]],
    pred_rows: Sequence[Sequence[Any]] | None,
    gold_of_display: list[int | None],
    pred_of_display: list[int | None],
) -> dict[str, Any]:
    g, p = pair["g"], pair["p"]
    gv = (
        None
        if g is None
        else [cell_text(gold_rows[g][c]) if c is not None else "" for c in gold_of_display][:COLUMNS]
    )
    pv = (
        None
        if p is None or pred_rows is None
        else [cell_text(pred_rows[p][c]) if c is not None else "" for c in pred_of_display][:COLUMNS]
    )
    return {"n": k, "g": g, "p": p, "gv": gv, "pv": pv, "diff": []}


def _differences(
    pair: dict[str, int | None],
    gold_rows: Sequence[Sequence[Any]],
    pred_rows: Sequence[Sequence[Any]],
    gold_of_display: list[int | None],
    pred_of_display: list[int | None],
) -> list[int]:
    """Display columns where this line differs: every column when a side has no row."""
    g, p = pair["g"], pair["p"]
    if g is None or p is None:
        return list(range(len(gold_of_display)))
    out = []
    for d, (gc, pc) in enumerate(zip(gold_of_display, pred_of_display, strict=True)):
        if gc is None or pc is None:
            out.append(d)
        elif not _CMP.cells(normalize_value(gold_rows[g][gc]), normalize_value(pred_rows[p][pc])):
            out.append(d)
    return out


def _first_text(
    line: int | None,
    column: int | None,
    pairs: list[dict[str, int | None]],
    gold_rows: Sequence[Sequence[Any]],
    pred_rows: Sequence[Sequence[Any]],
    columns: list[dict[str, str | None]],
    gold_of_display: list[int | None],
    pred_of_display: list[int | None],
) -> str | None:
    if line is None or column is None:
        return None
    g, p = pairs[line]["g"], pairs[line]["p"]
    col = columns[column]
    if g is None:
        return f"predicted row {p} has no gold row to pair with (line {line + 1})"
    if p is None:
        return f"gold row {g} has no predicted row (line {line + 1})"
    gc, pc = gold_of_display[column], pred_of_display[column]
    if gc is None:
        return f"extra predicted column {col['pred']!r}"
    if pc is None:
        return f"gold column {col['gold']!r} has no predicted column"
    return (
        f"line {line + 1}, gold column {col['gold']!r} (predicted {col['pred']!r}): "
        f"{cell_text(gold_rows[g][gc])} vs {cell_text(pred_rows[p][pc])}"
    )
