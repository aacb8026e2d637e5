"""Arrow files to pandas and back, in the child: the inputs and flexsql.sql() answers the server wrote, and
the DataFrame or Series a call returns (pandas and pyarrow are imported in the functions: the zygote has
loaded them before any child runs, and this module must import with the standard library alone)."""

from __future__ import annotations

import os
from typing import Any


def read_frame(path: str) -> Any:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.memory_map(path) as source:
        table = ipc.open_file(source).read_all()
    frame = table.to_pandas()
    # integers with NULLs would become floats; keep them integers (pandas' nullable Int dtypes)
    for position, column in enumerate(table.columns):
        if pa.types.is_integer(column.type) and column.null_count:
            frame.isetitem(position, column.to_pandas(types_mapper=_nullable_int))
    return frame


def _nullable_int(kind: Any) -> Any:
    import pandas as pd
    import pyarrow as pa

    return {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
    }.get(kind)


def frame_to_table(value: Any) -> Any:
    import pandas as pd
    import pyarrow as pa

    if isinstance(value, pd.Series):
        value = value.to_frame(name=value.name if value.name is not None else "value")
    frame = value
    index = frame.index
    if isinstance(index, pd.MultiIndex) or index.name is not None or not pd.api.types.is_integer_dtype(index):
        frame = frame.reset_index()  # a named or labelled index (groupby, value_counts, describe) is data
    if isinstance(frame.columns, pd.MultiIndex):
        frame.columns = ["_".join(str(p) for p in col if str(p)) for col in frame.columns]
    names, seen = [], set()
    for column in frame.columns:
        name, n = str(column), 1
        while name in seen:
            n += 1
            name = f"{column}_{n}"
        seen.add(name)
        names.append(name)
    arrays = []
    for position in range(frame.shape[1]):
        series = frame.iloc[:, position]
        try:
            arrays.append(pa.array(series, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
            arrays.append(pa.array([None if _is_missing(v) else str(v) for v in series], type=pa.string()))
    return pa.Table.from_arrays(arrays, names=names)


def _is_missing(value: Any) -> bool:
    try:
        return value is None or bool(value != value)
    except (TypeError, ValueError):
        return False


def write_table(table: Any, name: str) -> None:
    import pyarrow.ipc as ipc

    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh, ipc.new_file(fh, table.schema) as writer:
        writer.write_table(table)
