"""Snowflake (snowflake-connector-python, optional extra `flexsql[snowflake]`).

URL: `snowflake://user@account/DATABASE/SCHEMA?warehouse=…&role=…`. The password comes from
`SNOWFLAKE_PASSWORD` (or the connector's `connections.toml` with `?connection_name=NAME`), never
from output. Sessions run with MULTI_STATEMENT_COUNT=1, STATEMENT_TIMEOUT_IN_SECONDS and a
QUERY_TAG; a running query is aborted client-side at its deadline. Use a read-only role: Snowflake
has no read-only session switch, so the role is the engine-level layer here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from flexsql.config import LimitsConfig
from flexsql.errors import ConfigError, QueryError
from flexsql.tools.engines.cancel import Deadline, timeout_error
from flexsql.tools.engines.catalog import Catalog, Column, ForeignKey, TableInfo
from flexsql.tools.engines.engine import CellCap, Engine, QueryHistory
from flexsql.tools.engines.fetch import CellPlan, FetchLimits, collect, fetch_batches, plan_cells
from flexsql.tools.engines.paths import text_type
from flexsql.tools.engines.source import RunOutput, SafetyReport, Source


def _engine_refusal(what: str) -> QueryError:
    return QueryError(f"refused by the engine: {what} — this server is read-only")


def _tokens(sql: str) -> list[Any]:
    import sqlglot

    try:
        return sqlglot.tokenize(sql, read="snowflake")
    except Exception:
        raise _engine_refusal("the statement could not be tokenized as Snowflake SQL") from None


def _engine_check(sql: str) -> str:
    """See SnowflakeSource.engine_wrap. Returns the statement without trailing semicolons."""
    from sqlglot import TokenType

    from flexsql.errors import RefusedError
    from flexsql.tools.sql.guard import token_walk

    tokens = _tokens(sql)
    cut = next((t.start for t in tokens if t.token_type == TokenType.SEMICOLON), None)
    if cut is not None:
        if any(t.token_type != TokenType.SEMICOLON for t in tokens if t.start > cut):
            raise _engine_refusal("several statements in one call")
        sql = sql[:cut]
        tokens = [t for t in tokens if t.start < cut]
    if not tokens:
        raise _engine_refusal("the statement is empty")
    first, nxt = tokens[0], tokens[1] if len(tokens) > 1 else None
    if first.token_type == TokenType.COMMAND and first.text.upper() == "EXPLAIN" and nxt is not None:
        body = nxt.text if nxt.token_type == TokenType.STRING else sql[nxt.start :]
        if body.lstrip().upper().startswith(("ANALYZE", "ANALYSE")):
            raise _engine_refusal("EXPLAIN ANALYZE (it executes the statement)")
        _engine_check(body)
        target = _tokens(body)
        while target and target[0].text.upper() in ("USING", "TABULAR", "JSON", "TEXT"):
            target = target[1:]
        if not target or target[0].token_type not in (TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN):
            raise _engine_refusal("EXPLAIN of a statement that is not a query")
        return sql.strip()
    depth = 0
    for tok in tokens:  # what would break out of the wrapper: only this layer has a wrapper
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth < 0:
                raise _engine_refusal("a ')' without its '(' (it would close flexsql's wrapper)")
        elif tok.token_type == TokenType.COMMAND:
            raise _engine_refusal(f"{tok.text.upper()} (not a query)")
    if depth != 0:
        raise _engine_refusal("an unclosed '(' (it would swallow flexsql's wrapper)")
    try:  # the guard's own token walk, the same code as the parse-level layer (tools/sql/guard.py)
        token_walk(sql, SnowflakeSource.engine, tokens)
    except RefusedError as exc:
        raise QueryError(str(exc).replace("refused: ", "refused by the engine: ", 1)) from None
    return sql.strip()


def _outer_order(text: str, positional_names: bool = False) -> str:
    """The query's own top-level ORDER BY, restated outside flexsql's wrapper by output position
    (`ORDER BY 2 DESC`), because a subquery's order is not guaranteed to survive the outer SELECT.
    Empty when the query does not sort, or sorts by something the outer query cannot name (an
    expression not in its select list, or a select list with `*`): then the order stays inside.
    `positional_names`: by the wrapper's column names instead (`ORDER BY c1 DESC`), where the outer
    select list holds cut cells, not the values to sort by."""
    import sqlglot
    from sqlglot import exp

    from flexsql.tools.sql.order import outermost_query, top_level_order

    try:
        tree = sqlglot.parse_one(text, read="snowflake")
    except Exception:  # the parse-level guard parsed it already; here a miss only loses the order
        return ""
    order = top_level_order(tree)
    query = outermost_query(tree)
    if order is None or not isinstance(query, exp.Query):
        return ""
    outputs = list(query.selects)
    if any(
        isinstance(sel, exp.Star) or (isinstance(sel, exp.Column) and isinstance(sel.this, exp.Star))
        for sel in outputs
    ):
        outputs = []
    keys: list[str] = []
    for ordered in order.expressions:
        key = ordered.this
        position = None
        if isinstance(key, exp.Literal) and key.is_int:
            position = int(key.this)
        else:
            for i, sel in enumerate(outputs, 1):
                bare = isinstance(key, exp.Column) and not key.table
                if (
                    (bare and key.name.upper() == sel.alias_or_name.upper())
                    or key == sel.unalias()
                    or key == sel
                ):
                    position = i
                    break
        if position is None:
            return ""
        restated = ordered.copy()
        restated.set(
            "this", exp.column(f"c{position - 1}") if positional_names else exp.Literal.number(position)
        )
        keys.append(restated.sql(dialect="snowflake"))
    return " ORDER BY " + ", ".join(keys)


_PASSTHROUGH = ("warehouse", "role", "host", "port", "protocol", "authenticator", "connection_name", "region")


def connect_kwargs(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    segments = [unquote(s) for s in parts.path.split("/") if s]
    kwargs: dict[str, Any] = {k: query[k] for k in _PASSTHROUGH if k in query}
    if "port" in kwargs:
        kwargs["port"] = int(kwargs["port"])
    if parts.username:
        kwargs["user"] = unquote(parts.username)
    if parts.hostname:
        kwargs["account"] = parts.hostname
    if segments:
        kwargs["database"] = segments[0]
    if len(segments) > 1:
        kwargs["schema"] = segments[1]
    password = unquote(parts.password) if parts.password else os.environ.get("SNOWFLAKE_PASSWORD")
    if password:
        kwargs["password"] = password
    return kwargs


class Snowflake(Engine):
    name = dialect = "snowflake"
    url_schemes = ("snowflake",)
    password_env = "SNOWFLAKE_PASSWORD"
    notes = (
        "Snowflake: unquoted identifiers are UPPER case; VARIANT paths col:field::string, "
        "LATERAL FLATTEN(input => col); ILIKE; DATE_TRUNC; QUALIFY; sharded tables → FROM t_2024* (flexsql unions the shards)."
    )
    nested_notes = "col:key::string reads a VARIANT key, and LATERAL FLATTEN(input => col) unnests an array."
    query_history = QueryHistory(
        origin="QUERY_HISTORY",
        sql=(
            "SELECT query_text, count(*) AS calls FROM TABLE(information_schema.query_history(result_limit => 10000)) "
            "WHERE execution_status = 'SUCCESS' AND query_type = 'SELECT' GROUP BY query_text ORDER BY calls DESC LIMIT {n}"
        ),
        unreadable=(
            "it needs a role that may see the warehouse's queries (MONITOR on the warehouse, or a role with "
            "ACCOUNT_USAGE), and an emulator such as fakesnow has no history at all; or export the history to a "
            ".sql file and run `flexsql learn FILE --db URL`"
        ),
        timeout_s=120.0,
    )
    approx_distinct = "approx_count_distinct({expr})"
    # block sampling exists for tables only; views are sampled row by row
    sample_table = "{table} SAMPLE SYSTEM ({pct})"
    sample_view = "{table} SAMPLE BERNOULLI ({pct})"
    unquoted_case = "upper"
    # REGEXP_LIKE matches the whole value; REGEXP_INSTR finds a match anywhere, like the other engines
    regex_match = "REGEXP_INSTR({expr}, {pattern}) > 0"
    cloud = True
    binary_hex = "lower(hex_encode({expr}))"
    stages_and_sequences = True

    def cap_cell(self, expr: str, type_name: str, chars: int) -> CellCap | None:
        kind = type_name.upper()  # the connector's name of the type (SnowflakeSource passes it)
        if kind == "TEXT":
            return CellCap(f"IFF(LENGTH({expr}) > {chars}, SUBSTR({expr}, 1, {chars + 1}), {expr})")
        if kind in ("VARIANT", "OBJECT", "ARRAY", "MAP"):
            text = f"TO_VARCHAR({expr})"
            over = f"LENGTH({text}) > {chars}"
            return CellCap(
                f"IFF({over}, NULL, {expr})", text=f"IFF({over}, SUBSTR({text}, 1, {chars + 1}), NULL)"
            )
        return None  # BINARY holds at most 8 MB on Snowflake; numbers and dates are small

    def wrap_cells(self, sql: str, width: int, exprs: list[str]) -> str:
        # the query's own order restated outside (a subquery's order is not kept), by column name
        names = ", ".join(f"c{i}" for i in range(width))
        order = _outer_order(sql, positional_names=True)
        return f"SELECT {', '.join(exprs)} FROM (\n{sql}\n) AS flexsql_cells({names}){order}"

    # paths: col:"key"."key"::VARCHAR over VARIANT/OBJECT (JSON text parsed first), FLATTEN through arrays
    def json_text(self, expr: str, column_type: str) -> str:
        # a VARIANT holding an object cannot be CAST to VARCHAR; TO_JSON prints any
        return expr if text_type(column_type) else f"TO_JSON({expr})"

    def path_value(self, column_sql: str, column_type: str, keys: Sequence[str]) -> str:
        return f"{_variant(column_sql, column_type)}{_keys(self, keys)}::VARCHAR"

    def path_elements(
        self,
        table_sql: str,
        column_sql: str,
        column_type: str,
        before: Sequence[str],
        after: Sequence[str],
        alias: str,
    ) -> str:
        doc = _variant(column_sql, column_type)
        array = f"{doc}{_keys(self, before)}" if before else doc
        value = f"flexsql_e.value{_keys(self, after)}::VARCHAR" if after else "flexsql_e.value::VARCHAR"
        return f"SELECT {value} AS {alias} FROM {table_sql}, LATERAL FLATTEN(input => {array}) flexsql_e"


class SnowflakeSource(Source):
    engine = Snowflake()

    def __init__(
        self,
        name: str,
        url: str,
        description: str = "",
        limits: LimitsConfig | None = None,
        timeout_s: int = 300,
    ) -> None:
        super().__init__(name, url, description, limits)
        self._kwargs = connect_kwargs(url)
        self._conn: Any = None
        self._lock = threading.Lock()
        self._statement_timeout = timeout_s

    def _connection(self) -> Any:
        with self._lock:
            if self._conn is None or self._conn.is_closed():
                self._conn = self._open()
            return self._conn

    def _open(self) -> Any:
        try:
            import snowflake.connector
        except ImportError:
            raise ConfigError(
                "the Snowflake connector is not installed; run: pip install 'flexsql[snowflake]'"
            ) from None
        if not any(k in self._kwargs for k in ("password", "authenticator", "connection_name", "token")):
            raise ConfigError(
                f"no password for Snowflake {self.display_url}: set SNOWFLAKE_PASSWORD in the environment, "
                "or name a connections.toml entry with ?connection_name=NAME (or ?authenticator=…)"
            )
        params = {
            "MULTI_STATEMENT_COUNT": 1,
            "STATEMENT_TIMEOUT_IN_SECONDS": self._statement_timeout,
            "QUERY_TAG": "flexsql",
            "CLIENT_OUT_OF_BAND_TELEMETRY_ENABLED": False,
        }
        try:
            return snowflake.connector.connect(
                session_parameters=params, network_timeout=60, login_timeout=30, **self._kwargs
            )
        except Exception as exc:
            raise ConfigError(
                f"cannot connect to Snowflake {self.display_url}: {self._clean_error(exc).splitlines()[0]}"
            ) from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _clean_error(self, exc: BaseException) -> str:
        text = super()._clean_error(exc)
        secret = self._kwargs.get("password")
        return text.replace(secret, "***") if secret else text

    def __repr__(self) -> str:  # never show connect kwargs (they hold the password)
        return f"<SnowflakeSource {self.name!r} {self.display_url}>"

    # -- catalog --------------------------------------------------------------------------------
    def _load_catalog(self) -> Catalog:
        conn = self._connection()
        database = self._kwargs.get("database")
        prefix = f'"{database}".' if database else ""
        cur = conn.cursor()
        try:
            tables: dict[tuple[str, str], TableInfo] = {}
            cur.execute(
                f"SELECT table_catalog, table_schema, table_name, table_type, comment, row_count "
                f"FROM {prefix}information_schema.tables WHERE table_schema <> 'INFORMATION_SCHEMA' "
                "ORDER BY table_schema, table_name"
            )
            for db, schema, name, ttype, comment, rows in cur.fetchall():
                tables[(schema, name)] = TableInfo(
                    database=db,
                    schema_name=schema,
                    name=name,
                    kind="view" if "VIEW" in str(ttype).upper() else "table",
                    comment=comment or None,
                    row_estimate=rows,
                    # Snowflake keeps each table's row count in its metadata, exact (NULL for views)
                    rows_exact=rows is not None,
                )
            self._add_views(cur, prefix, tables)
            cur.execute(
                f"SELECT table_schema, table_name, column_name, data_type, is_nullable, comment "
                f"FROM {prefix}information_schema.columns WHERE table_schema <> 'INFORMATION_SCHEMA' "
                "ORDER BY table_schema, table_name, ordinal_position"
            )
            for schema, name, col, dtype, nullable, comment in cur.fetchall():
                info = tables.get((schema, name))
                if info is not None:
                    info.columns.append(
                        Column(
                            name=col,
                            type=dtype,
                            nullable=str(nullable).upper() == "YES",
                            comment=comment or None,
                        )
                    )
            self._load_keys(cur, tables)
            return Catalog(tables=list(tables.values()), default_schema=self._kwargs.get("schema"))
        finally:
            cur.close()

    @staticmethod
    def _add_views(cur: Any, prefix: str, tables: dict[tuple[str, str], TableInfo]) -> None:
        """Snowflake lists views in information_schema.tables; emulators may only have them in .views."""
        try:
            cur.execute(
                f"SELECT table_catalog, table_schema, table_name FROM {prefix}information_schema.views "
                "WHERE table_schema <> 'INFORMATION_SCHEMA'"
            )
            for db, schema, name in cur.fetchall():
                tables.setdefault(
                    (schema, name), TableInfo(database=db, schema_name=schema, name=name, kind="view")
                )
        except Exception:
            return

    @staticmethod
    def _load_keys(cur: Any, tables: dict[tuple[str, str], TableInfo]) -> None:
        """SHOW PRIMARY/IMPORTED KEYS where the engine has them (fakesnow does not: keys stay empty)."""
        try:
            cur.execute("SHOW PRIMARY KEYS")
            for row in cur.fetchall():
                info = tables.get((row[2], row[3]))
                if info is not None:
                    for col in info.columns:
                        col.primary_key = col.primary_key or col.name == row[4]
            cur.execute("SHOW IMPORTED KEYS")
            for row in cur.fetchall():
                info = tables.get((row[6], row[7]))
                if info is not None:
                    info.foreign_keys.append(
                        ForeignKey(
                            columns=[row[8]], ref_schema=row[2], ref_table=row[3], ref_columns=[row[4]]
                        )
                    )
        except Exception:  # keys are informative only; a missing privilege or emulator gap is fine
            return

    # -- execution ------------------------------------------------------------------------------
    @staticmethod
    def engine_wrap(sql: str) -> str:
        """The engine-level read-only layer on Snowflake, which has no read-only session: every
        statement except SHOW / DESCRIBE / EXPLAIN runs as a subquery, so the engine's own parser
        refuses anything that is not a query (DML, DDL, CALL, COPY, PUT, EXECUTE IMMEDIATE).

        Before wrapping, a token-level check (no parse tree, so nothing to misread) refuses what a
        query could still do or what could break out of the wrapper: a second statement after a
        `;`, unbalanced parentheses, sequence NEXTVAL, stages (`@…`), strings read as tables,
        EXPLAIN ANALYZE, and functions that read files, run SQL from a string or change state
        (the emulator used in tests, fakesnow, runs on DuckDB, whose file readers a real Snowflake
        does not have). Raises QueryError ("refused by the engine: …") when it refuses."""
        text = _engine_check(sql)
        tokens = _tokens(text)
        first = tokens[0].text.upper() if tokens else ""
        if first in ("SHOW", "DESC", "DESCRIBE", "EXPLAIN"):
            return text
        return f"SELECT * FROM (\n{text}\n){_outer_order(text)}"

    def _run(self, sql: str, timeout_s: float, limits: FetchLimits) -> RunOutput:
        text = _engine_check(sql)
        sql = self.engine_wrap(sql)
        conn = self._connection()
        cur = conn.cursor()
        plan, described = self._plan(cur, text, sql, limits) if sql != text else (None, None)
        if plan is not None:
            sql = plan.sql

        def abort() -> None:
            query_id = getattr(cur, "sfqid", None)
            if query_id:
                conn.cursor().execute(f"SELECT SYSTEM$CANCEL_QUERY('{query_id}')")

        deadline = Deadline(timeout_s, abort)
        try:
            with deadline:
                try:
                    cur.execute(sql, timeout=max(1, int(timeout_s + 0.999)))
                    if cur.description is None:
                        return [], [], [], 0, False, None
                    if plan is not None and described is not None:
                        columns, types = described
                    else:
                        columns = [d[0] for d in cur.description]
                        types = [str(d[1]) for d in cur.description]
                    batches = fetch_batches(cur)
                    rows, counted, more, cut = collect(plan.rows(batches) if plan else batches, limits)
                except Exception as exc:
                    if deadline.fired or "timeout" in str(exc).lower() and "statement" in str(exc).lower():
                        raise timeout_error(timeout_s) from None
                    raise QueryError(self._clean_error(exc)) from None
            return columns, types, rows, counted, more, cut
        finally:
            cur.close()

    def _plan(
        self, cur: Any, text: str, wrapped: str, limits: FetchLimits
    ) -> tuple[CellPlan | None, tuple[list[str], list[str]] | None]:
        """The wrapped query with its big cells cut by Snowflake, from the statement's described (not
        run) columns; (None, None) when describing fails (then values arrive whole: Snowflake's own
        limit is 16 MB a value)."""
        from snowflake.connector.constants import FIELD_ID_TO_NAME

        try:
            described = cur.describe(wrapped)
        except Exception:
            return None, None
        if not described:
            return None, None
        kinds = [FIELD_ID_TO_NAME[d.type_code] for d in described]
        plan = plan_cells(self.engine, text, kinds, limits.max_cell_bytes)
        return plan, ([d.name for d in described], [str(d.type_code) for d in described])

    def safety(self) -> SafetyReport:
        return SafetyReport(
            read_only_engine=False,
            measures=[
                "sqlglot guard (one read statement, dangerous functions, stages and sequences refused)",
                "MULTI_STATEMENT_COUNT=1",
                f"STATEMENT_TIMEOUT_IN_SECONDS={self._statement_timeout}",
                "QUERY_TAG=flexsql",
                "client-side abort at the deadline",
                "every statement but SHOW / DESCRIBE / EXPLAIN runs wrapped as a subquery, so Snowflake's "
                "parser refuses non-queries; a token check refuses a second statement, NEXTVAL, stages and "
                "file readers first",
            ],
            warnings=[
                "Snowflake has no read-only session switch: connect with a role that has only "
                "USAGE and SELECT grants (GRANT SELECT ON ALL TABLES IN DATABASE … TO ROLE flexsql_reader)"
            ],
        )


def _variant(column_sql: str, column_type: str) -> str:
    """A nested column as VARIANT: JSON kept as text is parsed first."""
    return f"PARSE_JSON({column_sql})" if text_type(column_type) else column_sql


def _keys(engine: Engine, keys: Sequence[str]) -> str:
    """The accessor of a VARIANT path after the value (`:"a"."b"`), each key quoted: key names are
    case-sensitive and may hold any character; an empty key has no quoted form, it is read in
    brackets (`['']`)."""
    out = ""
    for k in keys:
        if not k:
            out += f"[{engine.literal(k)}]"
        else:
            out += ("." if out else ":") + engine.quote(k)
    return out
