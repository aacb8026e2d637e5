from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from engines import ENGINES, engine_url  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the user's real cache directory (demo database, value indexes)."""
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(params=ENGINES)
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
    from flexsql.tools.sources import open_source

    source = open_source(shop_url, name="shop")
    yield source
    source.close()


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
