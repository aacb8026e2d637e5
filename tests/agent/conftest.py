"""The agent's tests share one shop per module (tests/support/agent_support.build_shop)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.agent_support import Shop, build_shop


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    built = build_shop(tmp_path_factory.mktemp("shop"))
    yield built
    built.close()
