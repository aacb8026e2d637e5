"""compare_results (tools/compare.py): adjacent big integers told apart, and results whose values were
cut refused, saying why."""

from __future__ import annotations

import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import InvalidArgument
from flexsql.tools.compare import CompareResults, compare_results
from flexsql.tools.engines import SourceRegistry
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext


def test_compare_results_tells_adjacent_big_integers_apart(duck_ctx):
    r1 = run_query(duck_ctx, RunQuery(sql="SELECT 9007199254740993::BIGINT AS n")).result_id
    r2 = run_query(duck_ctx, RunQuery(sql="SELECT 9007199254740992::BIGINT AS n")).result_id
    r3 = run_query(duck_ctx, RunQuery(sql="SELECT 9007199254740993::HUGEINT AS n")).result_id
    verdict = compare_results(duck_ctx, CompareResults(result_ids=[r1, r2, r3]))
    assert not verdict.equivalent
    assert sorted(map(sorted, verdict.groups)) == [sorted([r1, r3]), [r2]]


def _ctx(source, **limits) -> ToolContext:
    return ToolContext(sources=SourceRegistry([source]), limits=LimitsConfig(**limits))


def test_compare_results_refuses_cut_values_and_says_why(notes):
    ctx = _ctx(notes, store_cell_kb=1)
    a = run_query(ctx, RunQuery(sql="SELECT body FROM notes"))
    b = run_query(ctx, RunQuery(sql="SELECT body FROM notes ORDER BY id DESC"))
    with pytest.raises(InvalidArgument, match="kept only in part.*md5"):
        compare_results(ctx, CompareResults(result_ids=[a.result_id, b.result_id]))
    # positive control: the same comparison without the long value goes through
    c = run_query(ctx, RunQuery(sql="SELECT body FROM notes WHERE id <> 2"))
    d = run_query(ctx, RunQuery(sql="SELECT body FROM notes WHERE id <> 2 ORDER BY id DESC"))
    assert compare_results(ctx, CompareResults(result_ids=[c.result_id, d.result_id])).groups == [
        [c.result_id, d.result_id]
    ]
