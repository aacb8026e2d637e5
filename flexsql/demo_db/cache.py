"""The demo database in the user's cache: one file per scale, built on first use and reused after."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

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


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    """A lock between processes building the same file; the atomic rename keeps a file whole even
    without it, the lock only avoids building it twice."""
    with open(lock_path, "a+b") as handle:
        # a platform check, not a failed import, so type checkers know which module each branch has
        if sys.platform == "win32":
            import msvcrt

            handle.seek(0)
            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after ~10 s; keep waiting for a long build
                    continue
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
            return
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def demo_db_path(scale: float = 1.0) -> Path:
    """The demo database in the cache directory, built on first use (seed 42) and reused after."""
    path = cache_dir() / demo_db_file_name(scale)
    if path.exists():
        return path
    with _exclusive_lock(path.with_name(path.name + ".lock")):
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
