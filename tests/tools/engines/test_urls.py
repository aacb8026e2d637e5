"""Source URLs (tools/engines/urls.py): file URLs map to paths, and passwords stay out of every
printed form."""

from __future__ import annotations

import pytest


def test_repr_and_errors_hide_password(tmp_path):
    from flexsql.tools.engines import open_source

    source = open_source("postgresql://reader:s3cr3t-pw@127.0.0.1:1/nowhere")
    assert "s3cr3t-pw" not in repr(source) and "s3cr3t-pw" not in source.display_url
    with pytest.raises(Exception) as info:
        source.catalog()
    assert "s3cr3t-pw" not in str(info.value)


@pytest.mark.parametrize(
    "url, path",
    [
        ("duckdb:///abs/shop.duckdb", "/abs/shop.duckdb"),
        ("duckdb:////abs/shop.duckdb", "/abs/shop.duckdb"),
        ("sqlite:///./rel/shop.sqlite", "./rel/shop.sqlite"),
        ("duckdb://rel.duckdb", "rel.duckdb"),
        ("duckdb:///C:/data/shop.duckdb", "C:/data/shop.duckdb"),
        ("duckdb://:memory:", ":memory:"),
        ("sqlite:///my%20data/x.sqlite", "/my data/x.sqlite"),
    ],
)
def test_file_urls_map_to_paths(url, path):
    from flexsql.tools.engines.urls import file_path_of

    assert file_path_of(url) == path
