"""The exception hierarchy. Every message here is read by a person or a model: it says what
happened, why, and what to do.

Each class carries one stable `code`. MCP clients see it as the first word of a tool error's text
(`not_found: table 'ordrs' does not exist …`) and as `_meta["flexsql/error"]["code"]`; the
evaluation harness categorises failures by it instead of by matching words in messages.

    FlexSQLError                 internal     (base; a bare FlexSQLError is a flexsql bug)
    ├── ConfigError              config       source URL, flag, environment variable, config file
    ├── InvalidArgument          invalid_argument  a tool argument is missing, out of range, malformed
    ├── NotFoundError            not_found    table, column, source, tool or result handle
    ├── RefusedError             refused      the guard refused a statement (write, DDL, file reader…)
    ├── UnavailableError         unavailable  a feature that is switched off here (run_python, ask)
    ├── QueryError               engine_error the engine rejected or failed an allowed statement
    │   └── QueryTimeout         timeout      … ran past its time limit and was cancelled
    ├── ModelError               model_error  the model endpoint failed after retries, or its reply
    │                                         could not be used
    ├── BudgetExceeded           budget       a question's model-call / token / time budget ran out
    └── BusyError                busy         the server is at a ceiling (agent runs, sandboxes): retry later
"""

from __future__ import annotations


class FlexSQLError(Exception):
    """Base class for every error flexsql raises on purpose."""

    code = "internal"


class ConfigError(FlexSQLError):
    """A source URL, flag, environment variable or config file is invalid."""

    code = "config"


class RefusedError(FlexSQLError):
    """The guard refused a statement (a write, DDL, a dangerous function, several statements…)."""

    code = "refused"


class QueryError(FlexSQLError):
    """The engine rejected or failed a statement that the guard allowed."""

    code = "engine_error"


class QueryTimeout(QueryError):
    """A statement ran past its time limit and was cancelled on the engine."""

    code = "timeout"


class NotFoundError(FlexSQLError):
    """A table, column, source or result handle does not exist (the message lists near names)."""

    code = "not_found"


class InvalidArgument(FlexSQLError):
    """A tool argument is out of range or malformed."""

    code = "invalid_argument"


class UnavailableError(FlexSQLError):
    """A feature is switched off in this server (run_python when the sandbox is disabled, …)."""

    code = "unavailable"


class ModelError(FlexSQLError):
    """The model endpoint failed after its retries, or answered with something unusable."""

    code = "model_error"


class BudgetExceeded(FlexSQLError):
    """A question's budget (model calls, tokens, seconds) ran out."""

    code = "budget"


class BusyError(FlexSQLError):
    """The server is at one of its ceilings (agent runs, run_python sandboxes at once); the call
    waited its bounded time and changed nothing: try again later."""

    code = "busy"


ERROR_CODES: tuple[str, ...] = (
    "internal",
    "config",
    "invalid_argument",
    "not_found",
    "refused",
    "unavailable",
    "engine_error",
    "timeout",
    "model_error",
    "budget",
    "busy",
)


def error_code(exc: BaseException) -> str:
    """The code of any exception: ours carry one; anything else is an internal error."""
    return getattr(exc, "code", "internal") if isinstance(exc, FlexSQLError) else "internal"


def error_text(exc: BaseException) -> str:
    """`code: message` — the one way an error is shown to a model or a person. A message that
    already starts with its code (or with `refused:` and the like) is not prefixed twice."""
    code = error_code(exc)
    message = str(exc).strip() or type(exc).__name__
    if code == "internal" and not isinstance(exc, FlexSQLError):
        message = (
            f"internal error ({type(exc).__name__}): {message}. This is a flexsql bug; "
            "the call changed nothing, retry or rephrase"
        )
    lowered = message.lower()
    for prefix in (f"{code}:", f"{code.replace('_', ' ')}:"):
        if lowered.startswith(prefix):
            message = message[len(prefix) :].lstrip()
            break
    return f"{code}: {message}"
