"""Where flexsql keeps files of its own (the demo database, value indexes), private to the user:
they hold sampled values of every source, so folders are 0700 and files 0600."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, overload

import platformdirs

from flexsql.errors import ConfigError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) as 0700, and tighten it if it already exists looser."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    with contextlib.suppress(OSError):  # a folder we do not own: leave it, files inside are still 0600
        if path.stat().st_mode & 0o077:
            path.chmod(PRIVATE_DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Make sure `path` exists with mode 0600 before a library (SQLite) opens it with the umask's mode."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE_MODE)
    os.close(fd)
    with contextlib.suppress(OSError):
        if path.stat().st_mode & 0o077:
            path.chmod(PRIVATE_FILE_MODE)
    return path


def write_private(path: Path, text: str) -> None:
    """Write a text file readable by its owner only (it may hold what a run was given)."""
    with open_private(path) as handle:
        handle.write(text)


@overload
def open_private(path: Path, mode: Literal["w", "a"] = "w") -> TextIO: ...
@overload
def open_private(path: Path, mode: Literal["wb", "ab"]) -> BinaryIO: ...
def open_private(path: Path, mode: str = "w") -> IO[Any]:
    """Open `path` to write ("w", "wb") or append ("a", "ab"), readable by its owner only: created
    0600, and an existing file made 0600 (O_CREAT's mode applies to new files only)."""
    flags = os.O_CREAT | os.O_WRONLY | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    with contextlib.suppress(OSError):  # a file we do not own: it keeps its mode
        os.fchmod(fd, PRIVATE_FILE_MODE)
    return os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")


def cache_dir() -> Path:
    """The user cache directory; FLEXSQL_CACHE_DIR overrides it (tests point it at a temp dir). When
    the default one cannot be written (a read-only HOME), a private folder in the temp directory is
    used instead; a FLEXSQL_CACHE_DIR that cannot be written is a configuration error."""
    override = os.environ.get("FLEXSQL_CACHE_DIR")
    if override:
        return _writable(Path(override), "FLEXSQL_CACHE_DIR")
    try:
        return _writable(Path(platformdirs.user_cache_dir("flexsql")), "the user cache folder")
    except ConfigError as exc:
        fallback = Path(tempfile.gettempdir()) / f"flexsql-cache-{_user_id()}"
        try:
            found = _writable(fallback, "the fallback cache folder")
        except ConfigError:
            raise ConfigError(f"{exc}; and {fallback} cannot be written either") from None
        if str(exc) not in _warned:
            _warned.add(str(exc))
            logging.getLogger("flexsql.paths").warning("%s; using %s instead", exc, found)
        return found


_warned: set[str] = set()


def _user_id() -> str:
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else os.environ.get("USERNAME", "user")


def _writable(path: Path, what: str) -> Path:
    try:
        private_dir(path)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise ConfigError(
            f"{what} {path} cannot be created or written ({exc.strerror or exc}); set FLEXSQL_CACHE_DIR "
            "to a folder you can write (it holds the demo database, value indexes and conversations)"
        ) from None
    return path
