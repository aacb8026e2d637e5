"""Fetching rows under caps: keep rows up to a row and byte limit, keep counting up to a count
limit, and cut single cells (text, binary, lists, maps) that are too big to keep whole, saying so."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from flexsql.config import LimitsConfig

if TYPE_CHECKING:
    from flexsql.tools.engines.engine import Engine

DEFAULT_MAX_ROWS = 1_000
DEFAULT_MAX_BYTES = 8_000_000
DEFAULT_COUNT_LIMIT = 100_000
DEFAULT_MAX_CELL_BYTES = LimitsConfig().store_cell_kb * 1024  # [limits] store_cell_kb's default


@dataclass
class FetchLimits:
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int = DEFAULT_MAX_BYTES
    count_limit: int = DEFAULT_COUNT_LIMIT
    max_cell_bytes: int = DEFAULT_MAX_CELL_BYTES
    # max_bytes bounds what the kept rows hold in memory — their data and the tuples and objects Python
    # holds it in (held_bytes) — as the result store charges them, not only their printed size
    held: bool = False
    # claims bytes of a budget shared with other fetches and kept results (the server's result
    # store budget) as rows are kept; False: no room left, keep no more rows
    reserve: Callable[[int], bool] | None = None


NO_CELL_CAP = 2**30
"""A max_cell_bytes this big asks for whole values: the engine cuts nothing (PostgreSQL's substr
takes a 32-bit length, and no engine value is bigger than a gigabyte)."""

RESERVE_REFUSED = "server_store_mb"
"""The reason a fetch stopped keeping rows when its `reserve` found no room."""


@dataclass(frozen=True)
class FetchCut:
    """What a fetch left out: why rows stopped (None: every counted row is kept) and how many cells
    were cut. Rows and cells are different news for the reader ('rows 1-20 of 4,000' against 'this
    cell is a prefix'), so they are kept apart."""

    rows: str | None = None
    cells: int = 0
    max_cell_bytes: int = 0

    def __str__(self) -> str:
        note = f"{self.cells} cell(s) over max_cell_bytes={self.max_cell_bytes} cut" if self.cells else None
        return "; ".join(x for x in (self.rows, note) if x)


_CELL_TYPES = (str, bytes, bytearray, memoryview)
_TEXT_CLASSES = frozenset(_CELL_TYPES)
_NESTED_TYPES = (list, tuple, dict)  # DuckDB lists/arrays, structs and maps; PostgreSQL arrays, json


def nested_size(value: Any, cap: int) -> int:
    """Approximate printed bytes of a list/tuple/dict cell, counting stops once past `cap` (a
    100M-element list costs no more to measure than a small one)."""
    size = 2
    items = value.items() if isinstance(value, dict) else value
    for item in items:
        parts = item if isinstance(value, dict) else (item,)
        for part in parts:
            if part is None or isinstance(part, bool | int | float):
                size += 12  # a printed number and its separator, roughly
            elif isinstance(part, _CELL_TYPES):
                size += len(part) + 2
            elif isinstance(part, _NESTED_TYPES):
                size += nested_size(part, cap - size)
            else:
                size += len(str(part)) + 2
        if size > cap:
            return size
    return size


def _cell_size(value: Any, cap: int) -> int:
    if value.__class__ in _CELL_TYPES:
        return len(value)
    if isinstance(value, _NESTED_TYPES):
        return nested_size(value, cap)
    return 0


def _item_size(value: Any, cap: int) -> int:
    """One element's size as `nested_size` counts it."""
    return nested_size([value], cap) - 2


def cut_nested(value: Any, max_bytes: int) -> Any:
    """A list/dict cell cut to its first elements that fit in `max_bytes`, then a marker naming how
    many were dropped: the last element of a list is the string '… N more elements cut', a dict gets
    the key '…' with 'N more keys cut'. Elements that are themselves too big are cut in turn."""
    is_dict = isinstance(value, dict)
    items = list(value.items()) if is_dict else value
    kept: list[Any] = []
    size = 2 + 64  # room for the marker, so a cut cell is under the cap when measured again
    for item in items:
        part_cap = max(max_bytes - size, 16)
        if is_dict:
            key, inner = item
            inner = _cut_cell(inner, part_cap)
            cost = 4 + len(str(key)) + _item_size(inner, part_cap)
            item = (key, inner)
        else:
            item = _cut_cell(item, part_cap)
            cost = _item_size(item, part_cap)
        if size + cost > max_bytes:
            break
        kept.append(item)
        size += cost
    dropped = getattr(value, "total", len(items)) - len(kept)  # an engine-cut list knows its length
    if is_dict:
        out = dict(kept)
        if dropped:
            out["…"] = f"{dropped} more keys cut"
        return out
    if dropped:
        kept.append(f"… {dropped} more elements cut")
    return tuple(kept) if isinstance(value, tuple) else kept


def _cut_cell(value: Any, max_bytes: int) -> Any:
    if value.__class__ in _CELL_TYPES:
        if len(value) <= max_bytes:
            return value
        return value[: max_bytes - 1] + "…" if isinstance(value, str) else bytes(value[:max_bytes])
    if isinstance(value, _NESTED_TYPES) and nested_size(value, max_bytes) > max_bytes:
        return cut_nested(value, max_bytes)
    return value


def _is_cuttable(value: Any) -> bool:
    return value.__class__ in _CELL_TYPES or isinstance(value, _NESTED_TYPES)


def cut_big_cells(rows: list[tuple[Any, ...]], max_cell_bytes: int) -> int:
    """Cut, in place, every text, binary, list or dict cell bigger than `max_cell_bytes`; returns
    how many. Looks column by column without building the column (a column, a list of a million
    lengths and the length objects cost ~40 MB at the end of every big fetch): the classes in it and a
    text column's longest cell by C-level passes over it; cell by cell only where something may be
    too long, lists and dicts with a count that stops at the cap."""
    if not rows:
        return 0
    cut = 0
    for j in range(len(rows[0])):
        if len(rows) > 64 and not any(_is_cuttable(row[j]) for row in rows[:64]):
            continue  # not a text or nested column (sampled): numbers and dates cannot be huge
        classes = set(map(type, map(itemgetter(j), rows))) - {type(None)}
        if classes <= _TEXT_CLASSES:  # text or binary (or NULL) only: len is the size
            if max(map(len, filter(None, map(itemgetter(j), rows))), default=0) <= max_cell_bytes:
                continue
        elif not any(c in _CELL_TYPES or issubclass(c, _NESTED_TYPES) for c in classes):
            continue
        for i, row in enumerate(rows):
            value = row[j]
            if value.__class__ in _CELL_TYPES:
                size = len(value)
            elif isinstance(value, _NESTED_TYPES):  # an engine-cut list (_Sliced) is a list subclass
                size = nested_size(value, max_cell_bytes)
            else:
                continue
            if size > max_cell_bytes:
                values = list(row)
                values[j] = _cut_cell(value, max_cell_bytes)
                rows[i] = tuple(values)
                cut += 1
    return cut


def approx_size(row: Sequence[Any]) -> int:
    """A cheap estimate of a row's size in bytes (what it costs to keep and to print)."""
    size = 8
    for cell in row:
        if cell is None:
            size += 1
        elif isinstance(cell, str | bytes):
            size += len(cell) + 1
        elif isinstance(cell, int | float | bool):
            size += 8
        elif isinstance(cell, _NESTED_TYPES):
            size += nested_size(cell, DEFAULT_MAX_BYTES)
        else:
            size += len(str(cell)) + 1
    return size


BATCH_BYTES = 16 * 1024 * 1024
"""About how much one batch of rows may take in Python: the batch size follows the rows' size."""


def fetch_batches(cursor: Any, size: int = 2048) -> Iterator[Sequence[Sequence[Any]]]:
    """A DB-API cursor's rows in batches (every driver we use has fetchmany) of at most `size` rows,
    starting small and growing while the rows are small, so that a batch of wide rows (cells up to
    the store's cell cap each) never takes more than about BATCH_BYTES before anything is counted."""
    rows = min(16, size)
    while True:
        batch = cursor.fetchmany(rows)
        if not batch:
            return
        per_row = max(estimate_size(batch) // len(batch), 1)
        yield batch
        del batch  # before the next one is fetched: one batch in memory at a time, not two
        rows = max(1, min(size, rows * 8, BATCH_BYTES // per_row))


@dataclass(frozen=True)
class CellPlan:
    """A query wrapped so that the engine cuts big cells and flags infinities before the driver
    builds them (Engine.cap_cell, Engine.infinite_flag, Engine.lossy_types): `sql` returns the
    query's `width` columns, then extra ones, by position — a cell's text prefix when it was over the
    cap, a cut list's length, whether a far date is ±infinity. `rows` puts them back in place."""

    sql: str
    width: int
    texts: tuple[tuple[int, int], ...] = ()  # (column, position of its text prefix)
    lengths: tuple[tuple[int, int], ...] = ()  # (column, position of its whole length)
    infinite: tuple[tuple[int, int], ...] = ()  # (column, position of its infinity flag)

    def rows(self, batches: Iterator[Sequence[Sequence[Any]]]) -> Iterator[Sequence[Sequence[Any]]]:
        if not (self.texts or self.lengths or self.infinite):
            yield from batches
            return
        width, texts, lengths, infinite = self.width, self.texts, self.lengths, self.infinite
        for batch in batches:
            out: list[tuple[Any, ...]] = []
            for row in batch:
                values = tuple(row[:width])
                changed = [(col, row[at]) for col, at in texts if row[at] is not None]
                changed += [(col, _Sliced(row[col], row[at])) for col, at in lengths if row[at] is not None]
                changed += [(col, _infinity_text(row[col])) for col, at in infinite if row[at]]
                if changed:
                    cells = list(values)
                    for col, value in changed:
                        cells[col] = value
                    values = tuple(cells)
                out.append(values)
            del batch  # the driver's rows, with their extra columns: gone before the next batch
            yield out
            del out


class _Sliced(list[Any]):
    """The first elements of a list the engine cut, and how many it had: cut_nested counts from it."""

    def __init__(self, items: Any, total: int) -> None:
        super().__init__(items or [])
        self.total = int(total)


def _infinity_text(value: Any) -> str:
    """'-infinity' for the driver's stand-in of -infinity (date.min, year 1), else 'infinity'."""
    return "-infinity" if getattr(value, "year", 9999) <= 1 else "infinity"


def plan_cells(engine: Engine, sql: str, types: Sequence[str], max_cell_bytes: int) -> CellPlan | None:
    """The wrapped query that has `engine` cut the cells of `sql`, whose result columns have `types`
    (the caller keeps their names: the wrapper's are positional), or None when no column needs it."""
    exprs: list[str] = []
    extras: list[str] = []
    texts: list[tuple[int, int]] = []
    lengths: list[tuple[int, int]] = []
    infinite: list[tuple[int, int]] = []
    width = len(types)

    def extra(sql_expr: str, into: list[tuple[int, int]], column: int) -> None:
        into.append((column, width + len(extras)))
        extras.append(sql_expr)

    for i, type_name in enumerate(types):
        column = f"c{i}"
        expr = column
        if type_name.upper() in engine.lossy_types:
            expr = engine.as_text(column)
        else:
            # a cap of a gigabyte or more means none (exact comparisons): no SQL integer needed for it
            cap = engine.cap_cell(column, type_name, max_cell_bytes) if max_cell_bytes < NO_CELL_CAP else None
            if cap is not None:
                expr = cap.value
                if cap.text is not None:
                    extra(cap.text, texts, i)
                if cap.length is not None:
                    extra(cap.length, lengths, i)
        flag = engine.infinite_flag(column, type_name)
        if flag is not None:
            extra(flag, infinite, i)
        exprs.append(expr)
    if not extras and all(e == f"c{i}" for i, e in enumerate(exprs)):
        return None
    return CellPlan(
        sql=engine.wrap_cells(sql, width, exprs + extras),
        width=width,
        texts=tuple(texts),
        lengths=tuple(lengths),
        infinite=tuple(infinite),
    )


def held_bytes(rows: int, columns: int) -> int:
    """What CPython adds to `approx_size` for rows kept in memory: the tuple (56 bytes + 8 a cell) and
    about 40 bytes of object header a cell (a str is 49 bytes + its characters, an int 28). The server's
    result budget charges it, so that it bounds the process's memory, not the data's printed size."""
    return rows * (56 + 48 * columns)


def estimate_size(rows: Sequence[Sequence[Any]]) -> int:
    """Approximate bytes of many rows from a sample of at most 64 (exact for short lists)."""
    n = len(rows)
    if n <= 64:
        return sum(approx_size(r) for r in rows)
    step = n // 64
    sample = rows[::step][:64]
    return int(sum(approx_size(r) for r in sample) * n / len(sample))


def collect(
    batches: Iterator[Sequence[Sequence[Any]]], limits: FetchLimits
) -> tuple[list[tuple[Any, ...]], int, bool, FetchCut | None]:
    """Keep rows up to the row and byte caps, keep counting up to `count_limit`.

    Works a batch at a time (row-by-row Python costs seconds on million-row results); the byte
    cap uses a sampled size estimate per batch and goes row by row only in the batch that crosses it.
    Returns (rows, counted, more_than_counted, what was cut or None).
    """
    rows: list[tuple[Any, ...]] = []
    kept_bytes = 0
    counted = 0
    reason: str | None = None
    cells_cut = 0
    for batch in batches:
        if counted + len(batch) >= limits.count_limit:
            batch = batch[: limits.count_limit - counted]
            more = True
        else:
            more = False
        counted += len(batch)
        if reason is None:
            room = limits.max_rows - len(rows)
            take = batch if len(batch) <= room else batch[:room]
            size = estimate_size(take)
            reserve = limits.reserve
            held = size + held_bytes(len(take), len(take[0]) if take else 0)
            cost = held if limits.held else size
            if kept_bytes + cost <= limits.max_bytes and (reserve is None or reserve(held)):
                rows.extend(r if isinstance(r, tuple) else tuple(r) for r in take)
                kept_bytes += cost
            else:
                for row in take:
                    row = tuple(row)
                    if approx_size(row) > limits.max_cell_bytes:  # a huge cell: cut it, keep the row
                        cell_rows = [row]
                        cells_cut += cut_big_cells(cell_rows, limits.max_cell_bytes)
                        row = cell_rows[0]
                    row_size = approx_size(row)
                    row_held = row_size + held_bytes(1, len(row))
                    kept_bytes += row_held if limits.held else row_size
                    if kept_bytes > limits.max_bytes:
                        reason = f"max_bytes={limits.max_bytes}"
                        break
                    if reserve is not None and not reserve(row_held):
                        reason = RESERVE_REFUSED
                        break
                    rows.append(row)
            if reason is None and len(take) < len(batch):
                reason = f"max_rows={limits.max_rows}"
        if more:
            return rows, counted, True, _cut(rows, limits, reason or f"max_rows={limits.max_rows}", cells_cut)
        batch = take = ()  # rows not kept are freed before the next batch is fetched
    return rows, counted, False, _cut(rows, limits, reason, cells_cut)


def _cut(rows: list[tuple[Any, ...]], limits: FetchLimits, reason: str | None, cells: int) -> FetchCut | None:
    cells += cut_big_cells(rows, limits.max_cell_bytes)
    if reason is None and not cells:
        return None
    return FetchCut(rows=reason, cells=cells, max_cell_bytes=limits.max_cell_bytes)
