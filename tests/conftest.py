from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.engines import engine_params, engine_url


def pytest_configure(config: pytest.Config) -> None:
    """Never touch the user's real cache directory (demo database, value indexes): set before any
    fixture, module- and session-wide ones included, and inherited by server subprocesses."""
    os.environ["FLEXSQL_CACHE_DIR"] = tempfile.mkdtemp(prefix="flexsql-test-cache-")
    # knowledge stores (flexsql learn, remember) default to the user data folder: never the real one
    os.environ["FLEXSQL_DATA_DIR"] = tempfile.mkdtemp(prefix="flexsql-test-data-")
    # rankings must not depend on whether this machine has WordNet (its index builds in the background
    # mid-session); tests/tools/search/test_synonyms.py switches it on with files of its own
    os.environ["FLEXSQL_WORDNET_DIR"] = "off"
    # the same for the embedding model (its table vectors build in the background too); the tests of
    # tools/search/test_embeddings.py and test_semantic.py switch it on with a model of their own
    os.environ["FLEXSQL_EMBEDDINGS"] = "off"


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.get("FLEXSQL_CACHE_DIR", ""), ignore_errors=True)
    shutil.rmtree(os.environ.get("FLEXSQL_DATA_DIR", ""), ignore_errors=True)


@pytest.fixture(params=engine_params())
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def shop_url(engine: str, tmp_path: Path):
    """The URL of the shop test database on `engine` (parametrized over all four engines)."""
    with engine_url(engine, tmp_path) as url:
        yield url


@pytest.fixture
def shop(shop_url: str):
    """An open Source on the shop database, closed after the test."""
    from flexsql.tools.engines import open_source

    source = open_source(shop_url, name="shop")
    yield source
    source.close()


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
