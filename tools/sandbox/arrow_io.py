"""Arrow I/O between the server and the sandbox: the Arrow IPC files a call's inputs, flexsql.sql() answers
and result travel as, and the conversions between a Source's rows and Arrow tables (also used by the tools
layer to store what a call returned)."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import stat
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from flexsql.tools.sandbox.limits import MB

RESULT_NAME = re.compile(r"result-[0-9a-f]{16}\.arrow")


def write_arrow(path: str, table: pa.Table) -> None:
    with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    os.chmod(path, 0o644)


def read_result(workdir: str, name: str, max_bytes: int) -> pa.Table:
    """Read the child's result file without following links, bounded in size, fully validated."""
    if not RESULT_NAME.fullmatch(name):
        raise ValueError(f"unexpected result file name {name!r}")
    fd = os.open(os.path.join(workdir, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise ValueError("the result is not a plain file")
        if info.st_size > max_bytes:
            raise ValueError(f"the result file is larger than {max_bytes // MB} MB")
        data = fh.read(max_bytes + 1)
    table = ipc.open_file(pa.py_buffer(data)).read_all()
    table.validate(full=True)
    return table


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Building millions of tuples triggers the cyclic GC over and over; none of them can form cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def table_from_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> pa.Table:
    """Rows (as a Source returns them) to an Arrow table, column by column; a column Arrow cannot type
    (mixed kinds, integers beyond 64 bits) travels as text."""
    with _gc_paused():
        values_by_column = list(zip(*rows, strict=False)) if rows else [() for _ in columns]
        arrays = [_array(values) for values in values_by_column]
    return pa.Table.from_arrays(arrays, names=list(columns))


_CONVERSION_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
)


def _array(values: Sequence[Any]) -> pa.Array:
    # converting with a known type is up to 4x faster than letting Arrow infer it over every value
    sample = [v for v in values[:2000] if v is not None]
    if sample:
        try:
            kind = pa.array(sample).type
            if not pa.types.is_null(kind):
                return pa.array(values, type=kind)
        except _CONVERSION_ERRORS:
            pass
    try:
        return pa.array(values)
    except _CONVERSION_ERRORS:
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def rows_from_table(table: pa.Table) -> list[tuple[Any, ...]]:
    with _gc_paused():
        columns = [_column_values(table.column(i)) for i in range(table.num_columns)]
        if not columns:
            return [() for _ in range(table.num_rows)]
        return list(zip(*columns, strict=False))


def _column_values(column: pa.ChunkedArray) -> list[Any]:
    """Python values of a column; numpy's tolist is 3-10x faster than to_pylist for the common types."""
    kind = column.type
    values: list[Any]  # pyarrow has no annotations: what it returns is declared here
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        if column.null_count == 0:
            values = column.to_numpy().tolist()
        else:
            values = _with_nulls(
                column, column.fill_null(False if pa.types.is_boolean(kind) else 0).to_numpy().tolist()
            )
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        values = column.to_numpy(zero_copy_only=False).tolist()
    elif pa.types.is_date32(kind) or (pa.types.is_timestamp(kind) and kind.tz is None):
        if pa.types.is_timestamp(kind) and kind.unit == "ns":
            values = column.to_pylist()  # numpy would give integers for nanoseconds
        else:
            values = column.to_numpy().tolist()  # NaT becomes None
    else:
        values = column.to_pylist()
    return values


def _with_nulls(column: pa.ChunkedArray, values: list[Any]) -> list[Any]:
    import numpy as np

    for index in np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)):
        values[int(index)] = None
    return values


def sql_type(kind: pa.DataType) -> str:
    """A SQL type name for an Arrow type (what run_query would show)."""
    types = pa.types
    if types.is_boolean(kind):
        return "BOOLEAN"
    if types.is_integer(kind):
        return (
            {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[kind.bit_width]
            if types.is_signed_integer(kind)
            else {8: "UTINYINT", 16: "USMALLINT", 32: "UINTEGER", 64: "UBIGINT"}[kind.bit_width]
        )
    if types.is_floating(kind):
        return "FLOAT" if kind.bit_width <= 32 else "DOUBLE"
    if types.is_decimal(kind):
        return f"DECIMAL({kind.precision},{kind.scale})"
    if types.is_string(kind) or types.is_large_string(kind):
        return "VARCHAR"
    if types.is_date(kind):
        return "DATE"
    if types.is_timestamp(kind):
        return "TIMESTAMP WITH TIME ZONE" if kind.tz else "TIMESTAMP"
    if types.is_time(kind):
        return "TIME"
    if types.is_duration(kind):
        return "INTERVAL"
    if types.is_binary(kind) or types.is_large_binary(kind):
        return "BLOB"
    if types.is_null(kind):
        return "NULL"
    if types.is_dictionary(kind):
        return sql_type(kind.value_type)
    return str(kind).upper()
