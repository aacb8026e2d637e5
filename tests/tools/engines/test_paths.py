"""Nested columns seen by path (tools/engines/paths.py) on every engine: describe_table lists the keys
inside JSON/VARIANT columns as typed paths with examples, and sample_rows, distinct_values and
profile_column take a path as a column (`traffic.source`, `hits[].page.pagePath`), in `where` too."""

from __future__ import annotations

import re

import pytest

from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.tools.catalog import DescribeTable, describe_table
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.engines.paths import infer_paths, parse_path
from flexsql.tools.query import SampleRows, sample_rows
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.toolbox import TOOLS
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.warehouse import DIRECT_ROWS, TOTAL_ROWS, warehouse_url

# a reader that can call these tools only (an agent step once offered just these)
PLAN_TOOLS = ("describe_table", "find_join_path", "distinct_values", "find_values", "sample_rows")


@pytest.fixture
def ga(engine, tmp_path):
    with warehouse_url(engine, tmp_path) as url:
        source = open_source(url, name="ga")
        yield ToolContext(sources=SourceRegistry([source]))
        source.close()


def _col(name: str, engine: str) -> str:
    return name.upper() if engine == "snowflake" else name  # Snowflake folds unquoted names up


def test_describe_table_lists_nested_paths_with_types_and_examples(ga, engine):
    described = describe_table(ga, DescribeTable(table="ga_sessions_20170101"))
    traffic = next(c for c in described.columns if c.name.lower() == "traffic")
    paths = {p.path.split(".", 1)[1]: p for p in traffic.paths}
    assert paths["source"].type == "VARCHAR" and "'(direct)'" in paths["source"].examples
    assert paths["adwordsClickInfo.page"].type == "BIGINT"
    hits = next(c for c in described.columns if c.name.lower() == "hits")
    assert any(
        p.path.endswith("hits[].page.pagePath".replace("hits", _col("hits", engine))) for p in hits.paths
    )
    text = described.to_text()
    assert f"  - {_col('traffic', engine)}.source VARCHAR e.g. '(direct)'" in text


def test_value_tools_take_a_path_as_a_column(ga, engine):
    source = f"{_col('traffic', engine)}.source"
    counts = distinct_values(ga, DistinctValues(table="ga_sessions_*", column=source))
    assert {v.value: v.count for v in counts.values} == {
        "(direct)": DIRECT_ROWS,
        "google": TOTAL_ROWS - DIRECT_ROWS,
    }
    assert counts.column == source
    pages = distinct_values(
        ga, DistinctValues(table="ga_sessions_2017*", column=f"{_col('hits', engine)}[].page.pagePath")
    )
    assert pages.values[0].value == "/home" and pages.values[0].count == 9
    profile = profile_column(ga, ProfileColumn(table="ga_sessions_20170101", column=source))
    assert profile.rows == 3 and profile.distinct == 2
    rows = sample_rows(
        ga,
        SampleRows(
            table="ga_sessions_*", columns=["visit_id", source], where=f"{source} = '(direct)'", limit=50
        ),
    )
    assert rows.total_rows == DIRECT_ROWS and {r[1] for r in rows.rows} == {"(direct)"}
    assert rows.columns[1] == source


def test_a_bad_path_says_what_to_do(ga, engine):
    with pytest.raises(NotFoundError, match="did you mean"):
        distinct_values(ga, DistinctValues(table="ga_sessions_20170101", column="trafic.source"))
    with pytest.raises(NotFoundError, match="has no keys"):
        distinct_values(ga, DistinctValues(table="ga_sessions_20170101", column="visit_id.x"))
    with pytest.raises(InvalidArgument, match="through an array"):
        sample_rows(ga, SampleRows(table="ga_sessions_20170101", columns=[f"{_col('hits', engine)}[].page"]))


def test_an_array_path_in_sample_rows_points_to_a_tool_the_planner_has(ga, engine):
    """The plan stage offers sample_rows and distinct_values but not run_query: the refusal of a path
    through an array must send the planner to distinct_values, and to no tool it lacks."""
    path = f"{_col('hits', engine)}[].page.pagePath"
    with pytest.raises(InvalidArgument) as refused:
        sample_rows(ga, SampleRows(table="ga_sessions_*", columns=[path]))
    message = str(refused.value)
    assert f"distinct_values(column={path!r})" in message
    named = {name for name in TOOLS if re.search(rf"\b{name}\b", message)}
    assert named <= set(PLAN_TOOLS), sorted(named - set(PLAN_TOOLS))
    # and what it points to works: the planner gets the values of that path
    pages = distinct_values(ga, DistinctValues(table="ga_sessions_*", column=path))
    assert pages.values[0].value == "/home"


def test_describe_table_says_how_its_paths_are_read_with_the_tools_offered(ga, engine):
    """A planner reading the listed paths is told that its value tools take one as a column (the tool
    descriptions do not say so), naming only tools it has; and the call it is shown works."""
    described = describe_table(ga, DescribeTable(table="ga_sessions_*"))
    text = described.to_text(TextBudget(tools=frozenset(PLAN_TOOLS)))
    hint = next(line for line in text.splitlines() if line.startswith("paths read as columns: "))
    named = {name for name in TOOLS if re.search(rf"\b{name}\(", hint)}
    assert named == {"distinct_values", "sample_rows"} <= set(PLAN_TOOLS), hint
    column = re.search(r"distinct_values\(column='([^']+)'\)", hint)
    assert column and "[]" in column.group(1), hint
    values = distinct_values(ga, DistinctValues(table="ga_sessions_*", column=column.group(1)))
    assert values.values and values.column == column.group(1)
    plain = re.search(r"sample_rows\(columns=\['([^']+)'\]", hint)
    assert plain and sample_rows(ga, SampleRows(table="ga_sessions_*", columns=[plain.group(1)])).row_count
    alone = described.to_text(TextBudget(tools=frozenset({"describe_table"})))
    assert "paths read as columns" not in alone  # no tool to name: no hint


def test_paths_are_inferred_from_values_bounded():
    docs = [
        {"a": {"b": 1, "c": None}, "list": [{"x": "u"}, {"x": "v"}]},
        '{"a": {"b": 2.5}}',
        "not json",
        None,
    ]
    found = {p.path: p for p in infer_paths("col", docs)}
    assert found["col.a.b"].type == "DOUBLE" and found["col.a.b"].seen == 2
    assert found["col.list[].x"].examples == ["'u'", "'v'"]
    cut = '[{"page": {"pagePath": "/a"}}, {"page": {"pagePath": "/b", "title": "cut he'  # a cell over the cap
    assert [p.path for p in infer_paths("hits", [cut])] == ["hits[].page.pagePath"]
    # Parquet-style lists spend three levels per array: a leaf three arrays down is still listed
    wrapped = {"list": [{"element": {"screens": {"list": [{"element": {"cellLine": "TF-1"}}]}}}]}
    deep = {"list": [{"element": wrapped}]}
    assert [p.path for p in infer_paths("e", [deep])] == [
        "e.list[].element.list[].element.screens.list[].element.cellLine"
    ]
    wide = [{f"k{i}": i for i in range(500)}]
    assert len(infer_paths("w", wide)) == 40
    assert parse_path("hits[].page.pagePath").after == ("page", "pagePath")
    assert parse_path("plain") is None
    with pytest.raises(InvalidArgument):
        parse_path("a[].b[].c")


def test_find_values_names_the_path_of_a_nested_leaf(ga, engine, tmp_path, monkeypatch):
    from flexsql.tools.values.find import FindValues, find_values

    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path / "cache"))
    found = find_values(ga, FindValues(text="(direct)", tables=["ga_sessions_20170101"]))
    top = found.matches[0]
    assert top.column.lower() == "traffic.source" and top.value == "(direct)", found.to_text()
    assert "traffic.source" in found.to_text().lower()


@pytest.mark.parametrize("described", ["ga_sessions_20170101", "ga_sessions_*"])
def test_search_schema_shows_a_path_with_the_type_describe_table_gives(ga, engine, described):
    """Described by a shard or by the family's name, a nested path is typed alike in search_schema."""
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    table = describe_table(ga, DescribeTable(table=described))
    traffic = next(c for c in table.columns if c.name.lower() == "traffic")
    page = next(p for p in traffic.paths if p.path.lower().endswith("adwordsclickinfo.page"))
    assert page.type != "VARCHAR"  # a number: what search used to call every path
    found = search_schema(ga, SearchSchema(query="adwords click info page", limit=3))
    hit = next(c for c in found.columns if c.column.lower() == page.path.lower())
    assert hit.type == page.type
    assert f".{page.path} ({page.type})" in found.to_text()
