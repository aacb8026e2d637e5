"""The long value of the cell-cut tests (tests/tools/conftest.py's `notes` database holds it in row 2)."""

from __future__ import annotations

LONG = 5000  # characters of the long value: over a 1 KiB cell cap, far under the default 1 MiB
