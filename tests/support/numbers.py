"""Exact numbers a float would round: they must reach the agent, its text and its comparisons exactly."""

from __future__ import annotations

import decimal

D = decimal.Decimal

BIG18 = "12345678901234567"

BIG38 = "9" * 38

FRAC38 = "1234567890123456789.1234567890123456789"
