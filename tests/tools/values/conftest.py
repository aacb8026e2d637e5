"""Fixtures of the value tools' tests."""

from __future__ import annotations

import pytest

from flexsql.tools.engines import SourceRegistry
from flexsql.tools.runtime.context import ToolContext


@pytest.fixture
def ctx(shop) -> ToolContext:
    """A ToolContext over the shop database, on every engine."""
    return ToolContext(sources=SourceRegistry([shop]))
