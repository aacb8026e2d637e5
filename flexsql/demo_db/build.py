"""Writing a demo database file: atomically, from the schema and the fill statements."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from flexsql.demo_db.fill import fill, macros
from flexsql.demo_db.schema import SCHEMA, ddl
from flexsql.demo_db.sizes import Sizes, check_scale, sizes_for
from flexsql.errors import InvalidArgument

if TYPE_CHECKING:
    import duckdb

DEFAULT_SEED = 42


def _remove(path: Path) -> None:
    for p in (path, Path(str(path) + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def build_demo_db(path: Path, scale: float = 1.0, seed: int = DEFAULT_SEED) -> Path:
    """Write the demo database to `path` (replacing any file there) and return `path`.

    The file is built under a temporary name in the same directory and renamed into place only
    once complete, so readers never see a half-written database.
    """
    scale = check_scale(scale)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidArgument(f"demo database seed must be an integer, got {seed!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    sizes = sizes_for(scale)
    try:
        _write(tmp, sizes, seed)
        os.replace(tmp, path)
        with contextlib.suppress(FileNotFoundError):
            Path(str(tmp) + ".wal").unlink()
    except BaseException:
        _remove(tmp)
        raise
    return path


def _write(tmp: Path, sizes: Sizes, seed: int) -> None:
    import duckdb

    conn = duckdb.connect(
        str(tmp), config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    try:
        conn.execute("SET enable_progress_bar = false")
        for statement in macros(seed):
            conn.execute(statement)
        conn.execute("CREATE SCHEMA web")
        _load_tables(conn, sizes)
        conn.execute("DROP TABLE _orders")
        counted = conn.execute("SELECT count(*) FROM order_items").fetchone()
        assert counted is not None  # count(*) returns one row
        (lines,) = counted
        if lines != sizes.order_items:  # cannot happen with the spare orders; never ship a wrong size
            raise RuntimeError(f"demo generator made {lines} order lines instead of {sizes.order_items}")
        conn.execute("CHECKPOINT")
    finally:
        conn.close()


def _load_tables(conn: duckdb.DuckDBPyConnection, sizes: Sizes) -> None:
    loads: dict[str, list[str]] = {}
    for table_name, statement in fill(sizes):
        loads.setdefault(table_name, []).append(statement)
    # table by table: a referenced table has its key before any table that points at it
    for table in SCHEMA:
        before, after = ddl(table)
        for statement in [*before, *loads.pop(table.name, []), *after]:
            conn.execute(statement)
    if loads:
        raise RuntimeError(f"demo generator loads tables missing from SCHEMA: {sorted(loads)}")
