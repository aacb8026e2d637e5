"""The parse-level guard: one read statement, no dangerous functions, in the source's dialect.

This is the first of two layers. The second is the engine itself, opened read-only by every
source adapter, so a statement that fools this parser still cannot write. Refusals say what was
refused and why, and never carry a stack trace: anything the guard cannot check is refused
(fail closed), with a message, never an exception of another type.

Checks, in order: the text itself (empty, NUL, size, `U&"…"` escapes that can spell any name),
every name written in call position in the token stream (so quoting, comments and schema
qualification cannot hide a function), the statement count, the statement kind, then for an
allowed kind the tokens again (strings in table position, which DuckDB reads as files; Snowflake
stages) and a walk of the parse tree (writes hidden in CTEs, `SELECT … INTO`, row locks, files
read as tables, stages, sequences). A parse failure is refused; when the text starts with a
keyword that is not a read, the refusal names it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Protocol

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.errors import SqlglotError

from flexsql.errors import RefusedError

# sqlglot logs a warning each time it falls back to a generic Command; the guard refuses those
# itself, so it silences sqlglot's warnings while it checks, in its own thread only, instead of
# changing the level of sqlglot's logger for every other user of sqlglot in the process.
_GUARDING = threading.local()


class _QuietWhileGuarding(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(_GUARDING, "active", False) and record.levelno < logging.ERROR)


logging.getLogger("sqlglot").addFilter(_QuietWhileGuarding())


class GuardRules(Protocol):
    """What the guard needs to know about an engine. Each engine class in tools/engines declares
    these (an `Engine` is a GuardRules), so the guard itself never tests an engine's name."""

    dialect: str  # sqlglot's dialect name, for tokenizing and parsing
    read_roots: tuple[type[exp.Expression], ...]  # statement kinds that only read, beyond the common ones
    harmless_functions: frozenset[str]  # names of the deny list that are harmless on this engine
    credential_names: frozenset[str]  # catalogs refused wherever they are named
    credential_hint: str  # what to read instead of them
    stages_and_sequences: bool  # SQL can name stages (@stage) and advance sequences (seq.NEXTVAL)
    simple_show: bool  # a plain `SHOW name` only reads
    show_forms: str  # the forms of SHOW that run, named when another is refused
    show_hint: str  # the engine's own reason other forms are refused, or ""
    statement_hints: Mapping[str, str]  # advice added to a refused statement kind (by sqlglot node name)


READ_ONLY_HINT = "this server is read-only"
MAX_SQL_CHARS = 1_000_000

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
_ONLY_READS = "only SELECT / WITH / VALUES / SHOW / DESCRIBE / EXPLAIN run"

# Nodes that write, change state or configuration, anywhere in the tree.
_DENIED_NODES: dict[str, str] = {
    "Insert": "INSERT",
    "Update": "UPDATE",
    "Delete": "DELETE",
    "Merge": "MERGE",
    "Create": "CREATE",
    "Drop": "DROP",
    "Undrop": "UNDROP",
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
    "ListStage": "LIST (stage files)",
}
_DENIED_TYPES = tuple(getattr(exp, n) for n in _DENIED_NODES if hasattr(exp, n))

# Why a function is refused, by category. The messages name the function and the category.
_READS_FILES = "it reads files or the network outside the database"
_RUNS_SQL = "it runs SQL given as a string, which the guard cannot check"
_CHANGES_STATE = "it changes server, session or sequence state"
_OTHER_DB = "it reaches another database or server"

_DENIED_FUNCTIONS: dict[str, str] = {
    **dict.fromkeys(
        (
            "load_extension",
            "readfile",
            "writefile",
            "edit",
            "fsdir",
            "zipfile",
            "fts3_tokenizer",
            "read_csv",
            "read_csv_auto",
            "csv_scan",
            "sniff_csv",
            "read_parquet",
            "parquet_scan",
            "read_json",
            "read_json_auto",
            "read_json_objects",
            "read_json_objects_auto",
            "read_ndjson",
            "read_ndjson_auto",
            "read_ndjson_objects",
            "read_text",
            "read_blob",
            "glob",
            "read_xlsx",
            "st_read",
            "from_csv_auto",
            "read_file",
            "getenv",
            "duckdb_secrets",
            "which_secret",
            "load_aws_credentials",
            "lo_import",
            "lo_export",
            "pg_stat_file",
            "pg_current_logfile_contents",
            "get_presigned_url",
            "build_scoped_file_url",
            "build_stage_file_url",
            "get_stage_location",
            "infer_schema",
            "validate",
            "to_file",
        ),
        _READS_FILES,
    ),
    **dict.fromkeys(
        (
            "query",
            "query_table",
            "query_to_xml",
            "query_to_xml_and_xmlschema",
            "query_to_xmlschema",
            "cursor_to_xml",
            "cursor_to_xmlschema",
            "json_execute_serialized_sql",
            "ts_stat",
            "ts_rewrite",
            "crosstab",
            "crosstab2",
            "crosstab3",
            "crosstab4",
            "connectby",
            "xpath_table",
        ),
        _RUNS_SQL,
    ),
    **dict.fromkeys(
        (
            "nextval",
            "setval",
            "lastval",
            "set_config",
            "txid_current",
            "pg_current_xact_id",
            "pg_terminate_backend",
            "pg_cancel_backend",
            "pg_reload_conf",
            "pg_rotate_logfile",
            "pg_switch_wal",
            "pg_promote",
            "pg_notify",
            "pg_logical_emit_message",
            "pg_import_system_collations",
            "pg_nextoid",
            "pg_backup_start",
            "pg_backup_stop",
            "pg_start_backup",
            "pg_stop_backup",
            "pg_truncate_visibility_map",
            "loread",
            "lowrite",
            "external_function",
        ),
        _CHANGES_STATE,
    ),
    **dict.fromkeys(
        (
            "postgres_scan",
            "postgres_attach",
            "postgres_query",
            "postgres_execute",
            "mysql_query",
            "mysql_execute",
            "sqlite_scan",
            "sqlite_attach",
        ),
        _OTHER_DB,
    ),
}
_DENIED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("pg_read_", _READS_FILES),
    ("pg_ls_", _READS_FILES),
    ("pg_file_", _READS_FILES),
    ("lo_", _READS_FILES),
    ("read_json", _READS_FILES),
    ("read_csv", _READS_FILES),
    ("read_ndjson", _READS_FILES),
    ("read_parquet", _READS_FILES),
    ("parquet_", _READS_FILES),
    ("iceberg_", _READS_FILES),
    ("delta_", _READS_FILES),
    ("dblink", _OTHER_DB),
    ("postgres_", _OTHER_DB),
    ("mysql_", _OTHER_DB),
    ("sqlite_", _OTHER_DB),
    ("system$", _CHANGES_STATE),
    ("pg_advisory", _CHANGES_STATE),
    ("pg_try_advisory", _CHANGES_STATE),
    ("pg_replication_", _CHANGES_STATE),
    ("pg_create_", _CHANGES_STATE),
    ("pg_drop_", _CHANGES_STATE),
    ("pg_copy_", _CHANGES_STATE),
    ("pg_log_", _CHANGES_STATE),
    ("pg_logical_", _CHANGES_STATE),
    ("pg_stat_reset", _CHANGES_STATE),
    ("pg_stat_statements_reset", _CHANGES_STATE),
    ("pg_wal_replay_", _CHANGES_STATE),
    ("binary_upgrade_", _CHANGES_STATE),
)
# Built-ins that share a denied prefix but only read metadata.
_ALLOWED_FUNCTIONS = {
    "sqlite_version",
    "sqlite_source_id",
    "sqlite_compileoption_used",
    "sqlite_compileoption_get",
    "pg_create_time",
    "postgres_version",
}

_FILE_LIKE = re.compile(
    r"[/\\]|\.(csv|tsv|parquet|json|jsonl|ndjson|txt|xlsx|gz|zst|db|duckdb|sqlite\d?)$"
    r"|^(https?|s3|gs|az|hf|file)://",
    re.IGNORECASE,
)
_UNICODE_ESCAPE = re.compile(r"\bu&['\"]", re.IGNORECASE)
_LEADING_NOISE = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|//[^\n]*(?:\n|$)|/\*.*?\*/|\()*", re.DOTALL)
_FIRST_WORD = re.compile(r"[A-Za-z_]+")
# Statements that start like a read; a parse failure on anything else is refused by its keyword.
_READ_STARTS = {
    "SELECT",
    "WITH",
    "VALUES",
    "FROM",
    "EXPLAIN",
    "SHOW",
    "DESCRIBE",
    "DESC",
    "SUMMARIZE",
    "PIVOT",
    "UNPIVOT",
    "TABLE",
}
# A plain `SHOW name` (PostgreSQL, DuckDB): shows a setting or lists tables, never changes anything.
_SIMPLE_SHOW = re.compile(
    r"^\s*(ALL|TABLES|ALL\s+TABLES|DATABASES|[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)*)\s*;?\s*$", re.IGNORECASE
)
_EXPLAIN_OPTIONS = re.compile(
    r"^\s*(\((?P<opts>[^)]*)\)|(?P<words>((VERBOSE|COSTS|FORMAT\s+\w+|QUERY\s+PLAN|USING\s+\w+)\s+)*))",
    re.IGNORECASE,
)


def refuse(what: str, why: str = READ_ONLY_HINT) -> RefusedError:
    return RefusedError(f"refused: {what} is not allowed — {why}")


class SqlSyntaxRefusal(RefusedError):
    """The text is not SQL the guard recognises (a typo, prose): refused as a syntax error, not as a
    write — telling a user who typed SELEC that the server is read-only would mislead them."""


# Statement words some dialects' tokenizers do not list as keywords, still statements (not typos).
_STATEMENT_WORDS = frozenset(
    {"CHECKPOINT", "PUT", "UNDROP", "INSTALL", "ATTACH", "DETACH", "REINDEX", "CLUSTER", "REFRESH", "UNLOAD",
     "LISTEN", "UNLISTEN", "NOTIFY", "DISCARD", "IMPORT", "EXPORT", "DEALLOCATE", "PREPARE", "EXECUTE",
     "EXEC", "DO", "REMOVE", "RM", "GET", "LIST", "LS", "REASSIGN", "ABORT", "SAVEPOINT", "RELEASE", "LOCK",
     "START", "RESET", "BEGIN", "END", "COMMIT", "ROLLBACK", "SET", "VACUUM", "ANALYZE", "PRAGMA",
     "TRUNCATE", "COMMENT", "CALL", "GRANT", "REVOKE", "USE", "COPY", "LOAD", "MERGE", "UPSERT", "REPLACE",
     "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "RENAME", "SECURITY", "DECLARE", "FETCH",
     "MOVE", "CLOSE", "OPEN", "KILL", "FLUSH", "OPTIMIZE", "UNLOCK", "CHECK", "REPAIR", "HANDLER"}
)  # fmt: skip


def syntax_refusal(keyword: str, dialect: str, sql: str) -> SqlSyntaxRefusal | None:
    """A syntax refusal when `keyword` (a statement's first word) is no SQL word at all, else None.
    A first word with other letters in it (a homoglyph: Cyrillic Е in DЕLETE) keeps the refusal
    that names it."""
    word = keyword.split(" ")[0].upper()
    if not word or word in _READ_STARTS or word in _STATEMENT_WORDS:
        return None
    whole = re.match(r"\w+", _LEADING_NOISE.sub("", sql, count=1))
    if whole is None or whole.group(0).upper() != word:
        return None
    try:
        known = sqlglot.Dialect.get_or_raise(dialect).tokenizer_class.KEYWORDS
    except Exception:  # an unknown dialect name: keep the read-only wording
        return None
    if word in known:
        return None
    import difflib

    close = difflib.get_close_matches(word, sorted(_READ_STARTS), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return SqlSyntaxRefusal(
        f"refused: syntax error — {keyword} is not a SQL statement{hint}; send one SELECT statement"
    )


def denied_function_reason(name: str, rules: GuardRules | None = None) -> str | None:
    """Why the function `name` (any case, unqualified) may not run, or None when it may; `rules`
    (an engine) may declare names harmless on it."""
    name = name.lower()
    if name in _ALLOWED_FUNCTIONS or (rules is not None and name in rules.harmless_functions):
        return None
    if name in _DENIED_FUNCTIONS:
        return _DENIED_FUNCTIONS[name]
    for prefix, why in _DENIED_PREFIXES:
        if name.startswith(prefix):
            return why
    return None


def is_denied_function(name: str, rules: GuardRules | None = None) -> bool:
    return denied_function_reason(name, rules) is not None


def _check_credential_catalogs(tokens: list[Token], rules: GuardRules) -> None:
    """Refuse any mention of the engine's credential catalogs as a name (not inside a string), so
    aliases, CTEs, subqueries, quoting and schema qualification cannot reach them."""
    if not rules.credential_names:
        return
    for tok in tokens:
        if tok.token_type == TokenType.STRING:
            continue
        name = tok.text.strip('"').lower()
        if name in rules.credential_names:
            raise refuse(
                f"the catalog {name}", f"it holds credentials or raw column values; {rules.credential_hint}"
            )


def _first_word(sql: str) -> str:
    """The statement's keyword for messages: `DELETE`, `FORCE CHECKPOINT`, `START TRANSACTION`."""
    text = _LEADING_NOISE.sub("", sql, count=1)
    match = _FIRST_WORD.match(text)
    if not match:
        return ""
    word = match.group(0).upper()
    if word in ("FORCE", "START"):
        second = _FIRST_WORD.match(text[match.end() :].lstrip())
        if second:
            word += " " + second.group(0).upper()
    return word


def _check_tokens(tokens: list[Token], sql: str, rules: GuardRules) -> None:
    """Checks on the token stream, independent of how the parser builds its tree."""
    if _UNICODE_ESCAPE.search(sql):
        raise refuse(
            'a Unicode-escaped name or string (U&"…")', "they can spell a refused name; write names plainly"
        )
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        if (
            prev is not None
            and tok.token_type == TokenType.L_PAREN
            and prev.token_type not in (TokenType.STRING, TokenType.NUMBER)
        ):
            name = prev.text.strip('"`[]').lower()
            why = denied_function_reason(name, rules)
            if why:
                raise refuse(f"function {name}()", why)
        if not rules.stages_and_sequences:
            continue
        if prev is not None and prev.token_type == TokenType.DOT and tok.text.lower() == "nextval":
            raise refuse("sequence NEXTVAL", "it advances a sequence")
        if (
            tok.token_type == TokenType.STRING
            and prev is not None
            and prev.token_type == TokenType.L_PAREN
            and i > 1
            and tokens[i - 2].text.lower() == "identifier"
        ):
            # IDENTIFIER('name') names an object in a string, out of the parse tree's sight.
            target = tok.text.strip()
            if target.startswith("@") or target.lower().endswith("nextval"):
                raise refuse(f"IDENTIFIER({target!r})", "it names a stage or a sequence's NEXTVAL")


_TABLE_INTRODUCERS = {"FROM", "JOIN", "PIVOT", "UNPIVOT", "SUMMARIZE", "DESCRIBE", "DESC", "SHOW"}
_CLAUSES = {
    "SELECT",
    "FROM",
    "JOIN",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "QUALIFY",
    "LIMIT",
    "OFFSET",
    "UNION",
    "ON",
    "USING",
    "WINDOW",
    "VALUES",
    "INTERSECT",
    "EXCEPT",
    "MINUS",
}
_NOT_CALLS = {
    "FROM",
    "JOIN",
    "IN",
    "EXISTS",
    "AS",
    "ON",
    "USING",
    "VALUES",
    "SELECT",
    "LATERAL",
    "WITH",
    "UNION",
    "ALL",
    "ANY",
    "SOME",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "TABLE",
    "INTO",
    "OVER",
    "BY",
    "THEN",
    "ELSE",
    "WHEN",
}
_SUBQUERY_STARTS = (TokenType.SELECT, TokenType.WITH, TokenType.FROM, TokenType.VALUES)


def _string_read_as_table(tokens: list[Token]) -> str | None:
    """A string literal in table position (`FROM 'x.csv'`, `JOIN 'x'`, `FROM t, 'x'`, `SUMMARIZE 'x'`):
    DuckDB reads it as a file. The parse tree turns it into a quoted name, so look at the tokens.
    FROM inside a function call (`EXTRACT(YEAR FROM '2024-01-01')`, `TRIM('x' FROM s)`) is not a table."""
    depth, clause, call = 0, {0: ""}, {0: False}
    for i, tok in enumerate(tokens):
        kind = tok.token_type
        word = tok.text.upper().split()[0] if kind != TokenType.STRING and tok.text.strip() else ""
        prev = tokens[i - 1] if i else None
        if kind == TokenType.L_PAREN:
            depth += 1
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            prev_word = prev.text.upper() if prev is not None and prev.token_type != TokenType.STRING else ""
            call[depth] = (
                bool(prev_word[:1].isalpha() or prev_word[:1] == "_")
                and prev_word not in _NOT_CALLS
                and not (nxt is not None and nxt.token_type in _SUBQUERY_STARTS)
            )
            clause[depth] = ""
        elif kind == TokenType.R_PAREN:
            depth = max(depth - 1, 0)
        elif word in _CLAUSES:
            clause[depth] = word
        if kind != TokenType.STRING or prev is None or call.get(depth):
            continue
        introduced = prev.token_type != TokenType.STRING and prev.text.upper() in _TABLE_INTRODUCERS
        listed = prev.token_type == TokenType.COMMA and clause.get(depth) in ("FROM", "JOIN")
        if introduced or listed:
            return tok.text
    return None


def _check_statement_tokens(tokens: list[Token], rules: GuardRules) -> None:
    """Checks on the tokens of a statement whose kind is allowed."""
    if rules.stages_and_sequences and any(
        t.token_type == TokenType.PARAMETER and t.text == "@" for t in tokens
    ):
        raise refuse("reading a stage (@…)", "stages are files outside the database")
    target = _string_read_as_table(tokens)
    if target is not None:
        raise refuse(f"reading {target!r} as a table", "files outside the database are off limits")
    seen_semicolon = False
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            seen_semicolon = True
        elif seen_semicolon:
            raise refuse("several statements in one call", "send exactly one statement per call")


def token_walk(sql: str, rules: GuardRules, tokens: list[Token] | None = None) -> list[Token]:
    """The guard's checks that need no parse tree: names in call position, Unicode escapes, Snowflake
    sequences, IDENTIFIER() and stages, PostgreSQL credential catalogs, strings read as tables, a
    second statement. check_sql runs it; so does the Snowflake source's engine-level layer before it
    wraps a statement, so the two layers share one implementation and cannot drift apart.
    Returns the tokens; raises RefusedError."""
    tokens = sqlglot.tokenize(sql, read=rules.dialect) if tokens is None else tokens
    _check_tokens(tokens, sql, rules)
    _check_credential_catalogs(tokens, rules)
    _check_statement_tokens(tokens, rules)
    return tokens


def _check_tree(tree: exp.Expression, rules: GuardRules) -> None:
    for node in tree.walk():
        if isinstance(node, _DENIED_TYPES):
            label = _DENIED_NODES.get(type(node).__name__, type(node).__name__.upper())
            if isinstance(node, exp.Command):
                label = str(node.this).upper() or "this statement"
            raise refuse(label)
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            why = denied_function_reason(name, rules)
            if why:
                raise refuse(f"function {name}()", why)
        if isinstance(node, exp.Table):
            target = node.this
            if isinstance(target, exp.Var) and str(target.this).startswith("@"):
                raise refuse(f"reading stage {target.this}", "stages are files outside the database")
            if isinstance(target, exp.Identifier) and target.quoted and _FILE_LIKE.search(target.this):
                raise refuse(
                    f"reading the file {target.this!r} as a table",
                    "files outside the database are off limits",
                )
            if isinstance(target, exp.Literal) and target.is_string:
                raise refuse(
                    f"reading {target.this!r} as a table", "files outside the database are off limits"
                )
        if (
            isinstance(node, exp.Column)
            and rules.stages_and_sequences
            and node.name.lower() == "nextval"
            and node.table
        ):
            raise refuse("sequence NEXTVAL", "it advances a sequence")


def _strip_leading_comments(text: str) -> str:
    return re.sub(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", "", text, count=1, flags=re.DOTALL)


def _check_explain(body: str, rules: GuardRules) -> None:
    """EXPLAIN is allowed without ANALYZE (which runs the statement); its target is checked too."""
    body = _strip_leading_comments(body)
    m = _EXPLAIN_OPTIONS.match(body)
    options = (m.group("opts") or m.group("words") or "") if m else ""
    rest = _strip_leading_comments(body[m.end() :] if m else body)
    if re.search(r"\banaly[sz]e\b", options, re.IGNORECASE) or re.match(r"analy[sz]e\b", rest, re.IGNORECASE):
        raise refuse("EXPLAIN ANALYZE", "it executes the statement")
    check_sql(rest, rules)


def _statement_label(tree: exp.Expr, sql: str) -> str:
    if isinstance(tree, exp.Command):
        return _first_word(sql) or str(tree.this).upper() or "this statement"
    label = _DENIED_NODES.get(type(tree).__name__)
    if label:
        return label
    return _first_word(sql) or f"a {type(tree).__name__.upper()} statement"


def _check(sql: str, rules: GuardRules) -> str:
    tokens = sqlglot.tokenize(sql, read=rules.dialect)
    _check_tokens(tokens, sql, rules)
    _check_credential_catalogs(tokens, rules)
    statements = [
        s
        for s in sqlglot.parse(sql, read=rules.dialect)
        if s is not None and not isinstance(s, getattr(exp, "Semicolon", ()))
    ]
    if not statements:
        raise RefusedError("refused: the SQL text has no statement — send one SELECT statement")
    if len(statements) > 1:
        raise refuse(f"{len(statements)} statements in one call", "send exactly one statement per call")
    tree = statements[0]
    if isinstance(tree, exp.Command):
        keyword = str(tree.this).upper()
        body = (
            tree.expression.this if isinstance(tree.expression, exp.Literal) else str(tree.expression or "")
        )
        if keyword == "EXPLAIN":
            _check_explain(body, rules)
        elif keyword == "SHOW" and rules.simple_show and _SIMPLE_SHOW.match(body):
            pass
        elif keyword == "SHOW":  # the statement is allowed in general: say which form is not
            why = f"only the catalog forms of SHOW run here ({rules.show_forms})"
            raise refuse(
                f"SHOW {body.strip()[:60]}".strip(), f"{why}; {rules.show_hint}" if rules.show_hint else why
            )
        else:
            raise syntax_refusal(keyword, rules.dialect, sql) or refuse(
                _statement_label(tree, sql), f"{READ_ONLY_HINT}; {_ONLY_READS}"
            )
    elif isinstance(tree, _ALLOWED_ROOTS + rules.read_roots):
        token_walk(sql, rules, tokens)
        _check_tree(tree, rules)
    else:
        hint = f"{READ_ONLY_HINT}; {_ONLY_READS}"
        extra = rules.statement_hints.get(type(tree).__name__)
        if extra:
            hint += f"; {extra}"
        if type(tree).__name__ not in _DENIED_NODES:  # prose parsed as an expression ("HELLO world")
            syntax = syntax_refusal(_first_word(sql), rules.dialect, sql)
            if syntax is not None:
                raise syntax
        raise refuse(_statement_label(tree, sql), hint)
    # Keep exactly the statement: drop a trailing semicolon and anything (comments) after it.
    cut = next((t.start for t in tokens if t.token_type == TokenType.SEMICOLON), len(sql))
    return sql[:cut].strip().rstrip(";").strip()


def check_sql(sql: str, rules: GuardRules) -> str:
    """Return `sql` (without a trailing semicolon) if it is one read-only statement on the engine
    whose `rules` are given (a `flexsql.tools.engines.Engine`); raise RefusedError otherwise.
    Never raises any other exception type."""
    if not isinstance(sql, str) or not sql.strip():
        raise RefusedError("refused: the SQL text is empty — send one SELECT statement")
    if "\x00" in sql:
        raise RefusedError("refused: the SQL text contains a NUL byte — remove it")
    if len(sql) > MAX_SQL_CHARS:
        raise RefusedError(
            f"refused: the SQL text has {len(sql):,} characters, over the {MAX_SQL_CHARS:,} the guard "
            "checks — send a shorter statement"
        )
    outer = getattr(_GUARDING, "active", False)  # EXPLAIN checks its target re-entrantly
    _GUARDING.active = True
    try:
        return _check(sql, rules)
    except RefusedError:
        raise
    except (SqlglotError, RecursionError, ValueError, IndexError) as exc:
        keyword = _first_word(sql)
        if keyword and keyword not in _READ_STARTS:
            raise syntax_refusal(keyword, rules.dialect, sql) or refuse(
                keyword, f"{READ_ONLY_HINT}; {_ONLY_READS}"
            ) from None
        message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        if not isinstance(
            exc, SqlglotError
        ):  # the parser's own failure ("list index out of range"), not a syntax error
            message = f"the {rules.dialect} parser flexsql uses does not handle this form of {keyword or 'statement'}"
        raise RefusedError(
            f"refused: the SQL could not be parsed as {rules.dialect} ({message}) — only statements the guard can "
            "check are run; fix the syntax or rewrite it in standard SQL"
        ) from None
    except Exception as exc:  # fail closed: what the guard cannot check does not run
        raise RefusedError(
            f"refused: the guard could not check this statement ({type(exc).__name__}) — only statements the guard "
            "can check are run; simplify it"
        ) from None
    finally:
        _GUARDING.active = outer
