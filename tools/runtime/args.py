"""Checks shared by every tool's arguments."""

from __future__ import annotations

from flexsql.errors import InvalidArgument


def check_limit(name: str, value: int, low: int, high: int) -> int:
    """A whole number within [low, high], or a message saying which range to use."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    if value < low or value > high:
        raise InvalidArgument(f"{name}={value} is out of range: use a value from {low} to {high}")
    return value
