"""The engines: one module per engine (`<name>_source.py`: its `Engine` subclass and its `Source`),
and what they share. Code outside this package imports from here."""

from flexsql.tools.engines.cancel import CancelHooks, Deadline, active_cancel_hooks, timeout_error
from flexsql.tools.engines.catalog import Catalog, Column, ForeignKey, TableInfo
from flexsql.tools.engines.engine import (
    Engine,
    all_engines,
    default_engine,
    engine_for,
    engine_for_path,
    engine_for_url,
)
from flexsql.tools.engines.fetch import RESERVE_REFUSED, FetchCut, FetchLimits
from flexsql.tools.engines.gate import StatementGate, statement_owner
from flexsql.tools.engines.names import split_name
from flexsql.tools.engines.registry import SourceRegistry, open_source
from flexsql.tools.engines.source import QueryResult, SafetyReport, Source
from flexsql.tools.engines.urls import redact

__all__ = [
    "RESERVE_REFUSED",
    "CancelHooks",
    "Catalog",
    "Column",
    "Deadline",
    "Engine",
    "FetchCut",
    "FetchLimits",
    "ForeignKey",
    "QueryResult",
    "SafetyReport",
    "Source",
    "SourceRegistry",
    "StatementGate",
    "TableInfo",
    "active_cancel_hooks",
    "all_engines",
    "default_engine",
    "engine_for",
    "engine_for_path",
    "engine_for_url",
    "open_source",
    "redact",
    "split_name",
    "statement_owner",
    "timeout_error",
]
