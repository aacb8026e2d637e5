"""The exception hierarchy. Every message here is read by a person or a model: it says what
happened, why, and what to do."""

from __future__ import annotations


class FlexSQLError(Exception):
    """Base class for every error flexsql raises on purpose."""


class ConfigError(FlexSQLError):
    """A source URL, flag, environment variable or config file is invalid."""


class RefusedError(FlexSQLError):
    """The guard refused a statement (a write, DDL, a dangerous function, several statements…)."""


class QueryError(FlexSQLError):
    """The engine rejected or failed a statement that the guard allowed."""


class QueryTimeout(QueryError):
    """A statement ran past its time limit and was cancelled on the engine."""


class NotFoundError(FlexSQLError):
    """A table, column, source or result handle does not exist (the message lists near names)."""


class InvalidArgument(FlexSQLError):
    """A tool argument is out of range or malformed."""
