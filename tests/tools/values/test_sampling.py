"""Reading part of a big table (tools/values/sampling.py): distinct_values and profile_column sample
and say so."""

from __future__ import annotations

import pytest

from flexsql.tools.engines import all_engines
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.profile import ProfileColumn, profile_column


def test_big_tables_are_sampled_and_say_so(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    for each in all_engines().values():
        monkeypatch.setattr(type(each), "scan_above_rows", 0)
    table = ctx.source().catalog().resolve("orders")
    if not table.row_estimate:
        table.row_estimate = 7  # an engine without row estimates samples by reading the first rows
    d = distinct_values(ctx, DistinctValues(table="orders", column="status"))
    assert d.sampled and "sample" in d.to_text()
    assert sum(v.count for v in d.values) <= 7
    p = profile_column(ctx, ProfileColumn(table="orders", column="status"))
    assert p.sampled and p.distinct_approximate and "sampled" in p.to_text()
