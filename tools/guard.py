"""The parse-level guard: one read statement, no dangerous functions, in the source's dialect.

This is the first of two layers. The second is the engine itself, opened read-only by every
source adapter, so a statement that fools this parser still cannot write. Refusals say what was
refused and why, and never carry a stack trace.
"""

from __future__ import annotations

import logging
import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from flexsql.errors import RefusedError

# sqlglot logs a warning each time it falls back to a generic Command; we refuse those ourselves.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

READ_ONLY_HINT = "this server is read-only"

# Statement roots that only read.
_ALLOWED_ROOTS: tuple[type[exp.Expression], ...] = (
    exp.Select,
    exp.Union,
    exp.Intersect,
    exp.Except,
    exp.Values,
    exp.Subquery,
    exp.Describe,
    exp.Show,
)

# Nodes that write, change state or configuration, anywhere in the tree.
_DENIED_NODES: dict[str, str] = {
    "Insert": "INSERT",
    "Update": "UPDATE",
    "Delete": "DELETE",
    "Merge": "MERGE",
    "Create": "CREATE",
    "Drop": "DROP",
    "Alter": "ALTER",
    "AlterColumn": "ALTER",
    "Copy": "COPY",
    "Set": "SET",
    "SetItem": "SET",
    "Pragma": "PRAGMA",
    "Attach": "ATTACH",
    "Detach": "DETACH",
    "Install": "INSTALL",
    "Command": "this statement",
    "Into": "SELECT … INTO (it creates a table)",
    "Lock": "row locks (FOR UPDATE / FOR SHARE)",
    "Transaction": "transaction control",
    "Commit": "COMMIT",
    "Rollback": "ROLLBACK",
    "Use": "USE",
    "Grant": "GRANT",
    "Revoke": "REVOKE",
    "TruncateTable": "TRUNCATE",
    "LoadData": "LOAD DATA",
    "Refresh": "REFRESH",
    "Cache": "CACHE",
    "Uncache": "UNCACHE",
    "Comment": "COMMENT ON",
    "Analyze": "ANALYZE",
    "Export": "EXPORT",
    "Put": "PUT",
    "Get": "GET",
}
_DENIED_TYPES = tuple(getattr(exp, n) for n in _DENIED_NODES if hasattr(exp, n))

# Functions (scalar or table) that read files or the network, run SQL from a string, write,
# change settings or sessions, or reach other databases. Matched case-insensitively by name.
_DENIED_FUNCTIONS: dict[str, set[str]] = {
    "*": {
        "nextval", "setval", "lastval",  # sequences advance even in read-only mode on some engines
        "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",
        "set_config", "query", "query_table", "query_to_xml", "query_to_xml_and_xmlschema",
        "query_to_xmlschema", "cursor_to_xml", "cursor_to_xmlschema",
        "dblink", "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_send_query",
        "dblink_open", "dblink_fetch", "dblink_get_result",
        "lo_import", "lo_export", "lo_from_bytea", "lo_put", "lo_create", "lo_creat", "lo_unlink",
        "lo_open", "lo_get", "loread", "lowrite", "lo_truncate",
        "pg_read_file", "pg_read_binary_file", "pg_stat_file", "pg_file_write", "pg_file_rename",
        "pg_file_unlink", "pg_logdir_ls", "pg_file_sync",
        "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
        "pg_switch_wal", "pg_create_restore_point", "pg_promote", "pg_notify",
        "pg_logical_emit_message", "pg_import_system_collations", "pg_stat_reset",
        "txid_current", "pg_current_xact_id",
        "read_csv", "read_csv_auto", "csv_scan", "sniff_csv", "read_parquet", "parquet_scan",
        "parquet_metadata", "parquet_schema", "parquet_file_metadata", "parquet_kv_metadata",
        "parquet_bloom_probe", "read_json", "read_json_auto", "read_json_objects",
        "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects",
        "json_execute_serialized_sql", "read_text", "read_blob", "glob", "read_xlsx", "st_read",
        "iceberg_scan", "iceberg_metadata", "iceberg_snapshots", "delta_scan", "sqlite_scan",
        "sqlite_attach", "postgres_scan", "postgres_scan_pushdown", "postgres_attach",
        "postgres_query", "postgres_execute", "mysql_query", "mysql_execute", "duckdb_secrets",
        "which_secret", "load_aws_credentials", "getenv", "from_csv_auto", "read_file",
        "get_presigned_url", "build_scoped_file_url", "build_stage_file_url", "get_stage_location",
        "infer_schema", "validate", "to_file", "external_function",
    },
}
_DENIED_PREFIXES = ("pg_ls_", "pg_read_", "lo_", "dblink", "pg_file_", "system$", "pg_advisory", "pg_try_advisory",
                    "pg_replication_", "pg_create_", "pg_drop_", "pg_copy_", "pg_log_", "read_json", "read_csv",
                    "read_ndjson", "read_parquet", "parquet_", "iceberg_", "delta_", "sqlite_", "postgres_", "mysql_")
# Engine-specific built-ins that share a denied prefix but only read metadata.
_ALLOWED_FUNCTIONS = {"sqlite_version", "sqlite_source_id", "sqlite_compileoption_used", "sqlite_compileoption_get",
                      "pg_create_time", "postgres_version"}

_FILE_LIKE = re.compile(r"[/\\]|\.(csv|tsv|parquet|json|jsonl|ndjson|txt|xlsx|gz|zst|db|duckdb|sqlite\d?)$|^(https?|s3|gs|az|hf|file)://",
                        re.IGNORECASE)

_EXPLAIN_OPTIONS = re.compile(r"^\s*(\((?P<opts>[^)]*)\)|(?P<words>((VERBOSE|COSTS|FORMAT\s+\w+|QUERY\s+PLAN|USING\s+\w+)\s+)*))",
                              re.IGNORECASE)


def refuse(what: str, why: str = READ_ONLY_HINT) -> RefusedError:
    return RefusedError(f"refused: {what} is not allowed — {why}")


def _function_names(sql: str, dialect: str) -> set[str]:
    """Every name written in call position (`name(`), quoted or not, as the tokenizer sees it."""
    tokens = sqlglot.tokenize(sql, read=dialect)
    names: set[str] = set()
    for prev, tok in zip(tokens, tokens[1:], strict=False):
        if tok.token_type == TokenType.L_PAREN and prev.token_type not in (TokenType.STRING, TokenType.NUMBER):
            names.add(prev.text.strip('"`[]').lower())
    return names


def _denied_function(name: str) -> bool:
    if name in _ALLOWED_FUNCTIONS:
        return False
    return name in _DENIED_FUNCTIONS["*"] or name.startswith(_DENIED_PREFIXES)


def _check_tree(tree: exp.Expression, dialect: str) -> None:
    for node in tree.walk():
        if isinstance(node, _DENIED_TYPES):
            label = _DENIED_NODES.get(type(node).__name__, type(node).__name__.upper())
            if isinstance(node, exp.Command):
                label = str(node.this).upper() or "this statement"
            raise refuse(label)
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if _denied_function(name):
                raise refuse(f"function {name}()", "it reads files or the network, runs SQL from a string, "
                                                   "or changes server state")
        if isinstance(node, exp.Table):
            target = node.this
            if isinstance(target, exp.Var) and str(target.this).startswith("@"):
                raise refuse(f"reading stage {target.this}", "stages are files outside the database")
            if isinstance(target, exp.Identifier) and target.quoted and _FILE_LIKE.search(target.this):
                raise refuse(f"reading the file {target.this!r} as a table", "files outside the database are off limits")
            if isinstance(target, exp.Literal) and target.is_string:
                raise refuse(f"reading {target.this!r} as a table", "files outside the database are off limits")
        if isinstance(node, exp.Column) and dialect == "snowflake" and node.name.lower() in ("nextval",) and node.table:
            raise refuse("sequence NEXTVAL", "it advances a sequence")


def _check_explain(body: str, dialect: str) -> str:
    """EXPLAIN is allowed without ANALYZE (which runs the statement); its target is checked too."""
    m = _EXPLAIN_OPTIONS.match(body)
    options = (m.group("opts") or m.group("words") or "") if m else ""
    rest = body[m.end():] if m else body
    if re.search(r"\banaly[sz]e\b", options, re.IGNORECASE) or re.match(r"\s*analy[sz]e\b", rest, re.IGNORECASE):
        raise refuse("EXPLAIN ANALYZE", "it executes the statement")
    check_sql(rest, dialect)
    return body


def check_sql(sql: str, dialect: str) -> str:
    """Return `sql` (stripped of a trailing semicolon) if it is one read-only statement; raise
    RefusedError otherwise."""
    if not isinstance(sql, str) or not sql.strip():
        raise RefusedError("refused: the SQL text is empty — send one SELECT statement")
    if "\x00" in sql:
        raise RefusedError("refused: the SQL text contains a NUL byte — remove it")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
        called = _function_names(sql, dialect)
    except (SqlglotError, RecursionError, ValueError, IndexError) as exc:
        message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise RefusedError(
            f"refused: the SQL could not be parsed as {dialect} ({message}) — only statements the guard can "
            "check are run; fix the syntax or rewrite it in standard SQL"
        ) from None
    if not statements:
        raise RefusedError("refused: the SQL text has no statement — send one SELECT statement")
    if len(statements) > 1:
        raise refuse(f"{len(statements)} statements in one call", "send exactly one statement per call")
    tree = statements[0]
    denied = sorted(n for n in called if _denied_function(n))
    if denied:
        raise refuse(f"function {denied[0]}()", "it reads files or the network, runs SQL from a string, "
                                                "or changes server state")
    if isinstance(tree, exp.Command) and str(tree.this).upper() == "EXPLAIN":
        body = tree.expression.this if isinstance(tree.expression, exp.Literal) else str(tree.expression or "")
        _check_explain(body, dialect)
        return sql.strip().rstrip(";").strip()
    if isinstance(tree, exp.Summarize) if hasattr(exp, "Summarize") else False:
        _check_tree(tree, dialect)
        return sql.strip().rstrip(";").strip()
    if not isinstance(tree, _ALLOWED_ROOTS):
        label = _DENIED_NODES.get(type(tree).__name__)
        if isinstance(tree, exp.Command):
            label = str(tree.this).upper()
        raise refuse(label or f"a {type(tree).__name__.upper()} statement",
                     READ_ONLY_HINT + "; only SELECT / WITH / VALUES / SHOW / DESCRIBE / EXPLAIN run")
    _check_tree(tree, dialect)
    return sql.strip().rstrip(";").strip()
