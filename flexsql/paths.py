"""Where flexsql keeps files of its own (the demo database, value indexes)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """The user cache directory; FLEXSQL_CACHE_DIR overrides it (tests point it at a temp dir)."""
    override = os.environ.get("FLEXSQL_CACHE_DIR")
    path = Path(override) if override else Path(platformdirs.user_cache_dir("flexsql"))
    path.mkdir(parents=True, exist_ok=True)
    return path
