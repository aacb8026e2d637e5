"""The demo database in the user's cache: one file per scale, built on first use and reused after."""

from __future__ import annotations

import contextlib
from pathlib import Path

from filelock import FileLock

from flexsql.demo_db.build import DEFAULT_SEED, build_demo_db
from flexsql.demo_db.sizes import check_scale
from flexsql.paths import cache_dir

# Bump whenever the generated content or schema changes: the cached file name carries it, so
# users get a rebuild instead of a stale database.
GENERATOR_VERSION = 1


def _scale_label(scale: float) -> str:
    return f"{scale:.12g}".replace("+", "")


def demo_db_file_name(scale: float = 1.0) -> str:
    """The cache file name: generator version and DuckDB version are part of it, because a newer
    generator must rebuild and a file from another DuckDB version may not open."""
    import duckdb

    return (
        f"demo-v{GENERATOR_VERSION}-scale{_scale_label(check_scale(scale))}-duckdb{duckdb.__version__}.duckdb"
    )


def demo_db_path(scale: float = 1.0) -> Path:
    """The demo database in the cache directory, built on first use (seed 42) and reused after."""
    path = cache_dir() / demo_db_file_name(scale)
    if path.exists():
        return path
    # a lock between processes building the same file (filelock: flock, or msvcrt on Windows); the
    # atomic rename keeps the file whole even without it, the lock only avoids building it twice
    with FileLock(path.with_name(path.name + ".lock"), mode=0o600):
        if path.exists():  # another process built it while we waited
            return path
        # temporary files left by a build that crashed (we hold the lock: nobody else is building)
        for stale in path.parent.glob(f".{path.name}.*.tmp*"):
            with contextlib.suppress(OSError):
                stale.unlink()
        return build_demo_db(path, scale=scale, seed=DEFAULT_SEED)


def demo_url(scale: float = 1.0) -> str:
    """`duckdb:///…` URL of the cached demo database (built on first use)."""
    # the URL parser unquotes the path, so a literal '%' in the cache path must be escaped
    path = demo_db_path(scale).resolve().as_posix().replace("%", "%25")
    return "duckdb:///" + path.lstrip("/")
