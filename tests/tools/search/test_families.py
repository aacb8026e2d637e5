"""Shard families, releases and question dates (tools/search/families.py) on a warehouse-like catalog:
families group same-shape tables, take one slot and name their range, and the dates a question names
pick the shard."""

from __future__ import annotations

import pytest

from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.families import families, family_units, question_dates
from flexsql.tools.search.ranking import SearchSchema, search_schema


def _names(result) -> list[str]:
    return [t.table for t in result.tables]


def test_families_group_same_shape_similar_columns(wh: ToolContext) -> None:
    tables = wh.source().catalog().tables
    found = {f.pattern: len(f.members) for f in families(tables)}
    assert found["events_*"] == 31
    assert found["state_*_*yr"] == 12 and found["clinical_gdc_r*"] == 3 and found["indiv*"] == 3
    assert "report_*" not in found  # same name shape, unrelated columns
    units = family_units(tables)
    assert units["analytics.events_20210105"] == units["analytics.events_20210131"] == "analytics.events_*"


def test_a_family_takes_one_slot_and_names_its_range(wh: ToolContext) -> None:
    result = search_schema(wh, SearchSchema(query="app events by platform", limit=5))
    top = result.tables[0]
    assert top.table == "analytics.events_20210131"  # the latest stands for the family
    assert (top.family, top.family_size) == ("analytics.events_*", 31)
    assert top.family_range == "events_20210101 … events_20210131"
    assert "latest of the family: events_20210131" in top.why
    assert sum(t.table.startswith("analytics.events_") for t in result.tables) == 1
    assert "(family analytics.events_*: 31 tables events_20210101 … events_20210131)" in result.to_text()


@pytest.mark.parametrize(
    ("question", "shard"),
    [
        ("How many app events happened on January 18, 2021?", "analytics.events_20210118"),
        ("events of 2021-01-07 per platform", "analytics.events_20210107"),
        ("users active on 18 January 2021", "analytics.events_20210118"),  # no word matches: the date alone
    ],
)
def test_question_dates_pick_the_shard(wh: ToolContext, question: str, shard: str) -> None:
    top = search_schema(wh, SearchSchema(query=question, limit=5)).tables[0]
    assert top.table == shard
    assert top.why[0] == f"question dates name {shard.split('.')[1]}"


def test_two_digit_years_and_releases(wh: ToolContext) -> None:
    top = search_schema(wh, SearchSchema(query="occupation and wage of respondents in 2016", limit=3)).tables[
        0
    ]
    assert top.table == "survey.indiv16" and top.date_members == ["indiv16"]
    clinical = search_schema(wh, SearchSchema(query="primary diagnosis and vital status", limit=3)).tables[0]
    assert clinical.table == "clinical.clinical_gdc_r35" and clinical.family_size == 3
    acs = search_schema(
        wh, SearchSchema(query="median income by state from the 2018 survey", limit=3)
    ).tables[0]
    assert acs.table in ("census.state_2018_1yr", "census.state_2018_5yr")
    assert set(acs.date_members) == {"state_2018_1yr", "state_2018_5yr"}


def test_date_ranges_name_every_year() -> None:
    assert {"2011", "2012", "2013", "2014"} <= question_dates("from 2011 to 2014")
    assert "20230118" in question_dates("On January 18, 2023, how many")
    assert "201709" in question_dates("in September 2017")
    assert question_dates("the top 10 customers") == set()
