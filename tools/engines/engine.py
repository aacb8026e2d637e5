"""What flexsql knows about an engine's SQL, declared once per engine as a class.

`Engine` holds the defaults most engines share; each engine module (`<name>_source.py`) defines a
subclass that overrides only what differs (sqlglot's `Dialect` is the model) and the `Source`
subclass that connects to it (`engine = DuckDB()`; registry.py finds a Source by its engine). Everything engine-specific outside the
connection lives here: rendering (casts, sampling, regular expressions, identifier folding,
quoting), URL and file conventions, and the rules the read-only guard (tools/sql/guard.py) applies
per engine. Nothing else in flexsql tests `dialect == "…"`, so a new engine is one new module.

Templates are `str.format` patterns over SQL that is already safe (quoted identifiers, sqlglot
literals); an engine never sees user text unquoted. Engines are stateless: one instance each.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, ClassVar, Literal, Self

from sqlglot import exp

from flexsql.errors import ConfigError, InvalidArgument

if TYPE_CHECKING:
    from flexsql.tools.engines.catalog import TableInfo


@dataclass(frozen=True)
class CellCap:
    """SQL that cuts one column's big cells (Engine.cap_cell), over the column expression."""

    value: str
    """The cell, cut in place when a prefix keeps its type (text, binary, the first elements of a
    list); NULL when `text` carries it instead."""
    text: str | None = None
    """For a type that no prefix of keeps (maps, structs, lists of text): the cell's text, its first
    chars + 1 characters, when it is over the cap; else NULL."""
    length: str | None = None
    """For a list cut to its first elements in `value`: how many elements it had (else NULL), so the
    cut says how many were dropped."""


@dataclass(frozen=True)
class QueryHistory:
    """Where an engine keeps the statements it ran, read-only like every query."""

    origin: str  # its name, as the knowledge store records where facts came from
    sql: str  # {n}: rows at most; returns (statement text, times it ran)
    unreadable: str  # why reading it can fail and what to do (after "… cannot be read (error). ")
    check: str | None = None  # one value, true when the history exists at all
    missing: str = ""  # what to do when `check` says it does not
    timeout_s: float = 60.0


class Engine:
    """An engine's SQL habits. Subclasses override only the attributes and methods that differ."""

    # -- identity ---------------------------------------------------------------------------------
    name: str = ""
    """What flexsql calls the engine in records and `flexsql sources` (`postgresql`)."""
    dialect: str = ""
    """sqlglot's dialect name (also `Source.dialect`)."""
    url_schemes: tuple[str, ...] = ()
    """URL schemes that open this engine (`postgresql://…`)."""
    file_suffixes: tuple[str, ...] = ()
    """For one-file databases: file name suffixes that mean this engine (`.duckdb`); the URL is
    then a path (`duckdb:///abs/path`), which carries no secrets."""
    password_env: str | None = None
    """The environment variable the engine's client reads a password from."""
    notes: str = ""
    """One line for the model: the engine's SQL habits that differ from the others."""

    # -- rendering --------------------------------------------------------------------------------
    text_type: str = "VARCHAR"
    """The type any value casts to for text matching: CAST(x AS <text_type>)."""
    double_type: str | None = None
    """A float type averages cast to, because avg over DECIMAL(38,10) overflows some engines'
    exact sum; None: the engine's own avg is safe as is."""
    approx_distinct: str | None = None
    """Approximate distinct count over `{expr}`, used on tables too big to count exactly;
    None: the engine has none and counts exactly."""
    explain_prefix: str = "EXPLAIN "
    """What turns a query into a plan-only statement that checks it without running it."""
    sample_table: str | None = None
    """A FROM item reading about `{pct}` percent of base table `{table}` (block sampling where the
    engine has it); None: the engine cannot sample, tools read the first rows instead."""
    sample_view: str | None = None
    """The same for views; None where the engine samples only base tables."""
    sample_label: str = "sample"
    """How the sampling is described to the user ("~1.5% block sample")."""
    scan_above_rows: int = 2_000_000
    """Row estimate above which tools sample instead of scanning (scans cost money on warehouses;
    DuckDB scans tens of millions of rows a second)."""
    unquoted_case: Literal["lower", "upper", "insensitive"] = "insensitive"
    """What the engine does to an unquoted identifier: folds it to lower or upper case, or
    matches names case-insensitively whatever their spelling."""
    schema_in_names: bool = True
    """Whether table names are qualified by schema (and catalog); False: one database per file,
    tables are named alone."""
    dynamic_types: bool = False
    """Values carry their own type whatever the column declares (SQLite's affinity): a column of
    any type may hold text, so tools cut and compare values as they are."""
    ilike: bool = True
    """Whether ILIKE exists; without it LIKE is the case-insensitive match (ASCII case only)."""
    regex_match: str | None = None
    """A condition true when `{expr}` contains a match of regular expression `{pattern}` anywhere;
    None: the engine has no regular expressions."""
    double_quoted_strings: bool = False
    """Whether a double-quoted word that names no column is read as a string literal (SQLite)
    rather than failing as an unknown column."""
    cloud: bool = False
    """A paid warehouse: every scan costs money (Spider 2's evaluator also scores an empty result 0)."""
    binary_hex: str = "lower(hex({expr}))"
    """Lower-case hex digits of binary `{expr}`: value tools show BLOBs as `0x…`, like every other tool."""

    # -- the guard's rules (tools/sql/guard.py reads them through its GuardRules protocol) ------------
    read_roots: tuple[type[exp.Expression], ...] = ()
    """Statement kinds that only read on this engine, beyond SELECT/WITH/VALUES/SHOW/DESCRIBE."""
    harmless_functions: frozenset[str] = frozenset()
    """Names the guard's deny list holds that are harmless here (SQLite's glob() matches a pattern)."""
    credential_names: frozenset[str] = frozenset()
    """Catalogs refused wherever they are named, because they hold credentials or raw values."""
    credential_hint: str = ""
    """What to read instead of a refused credential catalog."""
    stages_and_sequences: bool = False
    """Whether SQL can name stages (`@stage`, files outside the database) and advance sequences
    through `seq.NEXTVAL` or `IDENTIFIER('…')`: the guard then looks for them."""
    simple_show: bool = False
    """Whether a plain `SHOW name` (a setting, or the catalog's tables) is a read on this engine."""
    show_forms: str = "SHOW <setting>"
    """The forms of SHOW that run, named when another form is refused."""
    show_hint: str = ""
    """Why other forms of SHOW are refused, when the engine has a reason of its own."""
    statement_hints: Mapping[str, str] = {}
    """Advice added to the refusal of a statement kind (by sqlglot node name): what reads instead."""
    nested_notes: str = ""
    """How this dialect reads a key of a nested (JSON, VARIANT, STRUCT) column and unnests an array."""
    query_history: QueryHistory | None = None
    """Where the engine keeps the statements it ran (`flexsql learn --history`); None: it keeps none."""

    # -- rendering helpers --------------------------------------------------------------------------
    def quote(self, name: str) -> str:
        """An identifier quoted exactly as stored."""
        return exp.to_identifier(name, quoted=True).sql(dialect=self.dialect)

    def quote_table(self, table: TableInfo) -> str:
        """A table's full name, each part quoted exactly as stored."""
        if table.from_sql:  # a table seen through a path: its own FROM item
            return table.from_sql
        parts = [p for p in (table.database, table.schema_name, table.name) if p]
        if table.shards:  # a family: its reference, expanded into the union of its shards by Source.execute
            parts = parts[-1:] if not self.schema_in_names else parts
            return ".".join(self.quote(p) for p in parts)
        if not self.schema_in_names:  # one database per file: the schema is always main
            parts = [table.name]
        elif table.sql_catalog and not table.database:  # a schema named like a catalog: say which catalog
            parts = [table.sql_catalog, *parts]
        return ".".join(self.quote(p) for p in parts)

    def literal(self, value: str) -> str:
        """A string literal in this engine's syntax."""
        return exp.Literal.string(value).sql(dialect=self.dialect)

    def fold(self, name: str) -> str | None:
        """An unquoted identifier as the engine stores it; None when names match case-insensitively."""
        if self.unquoted_case == "lower":
            return name.lower()
        if self.unquoted_case == "upper":
            return name.upper()
        return None

    def as_text(self, expr: str) -> str:
        return f"CAST({expr} AS {self.text_type})"

    def binary_text(self, expr: str) -> str:
        """A BLOB as the text `0x<hex>` (what render.cell_text shows for bytes)."""
        return "'0x' || " + self.binary_hex.format(expr=expr)

    # -- nested columns by path (tools/engines/paths.py) ---------------------------------------------
    def path_value(self, column_sql: str, column_type: str, keys: Sequence[str]) -> str:
        """The text of the value at `keys` inside a nested column (JSON, VARIANT, STRUCT, MAP, or JSON
        kept as text); NULL where a row lacks it."""
        raise InvalidArgument(f"{self.name} reads no paths inside nested columns: select the column whole")

    def json_text(self, expr: str, column_type: str) -> str:
        """A nested column's value as JSON text (what nested_sample.py reads and parses); JSON kept as
        text as it is."""
        return self.as_text(expr)

    def path_elements(
        self,
        table_sql: str,
        column_sql: str,
        column_type: str,
        before: Sequence[str],
        after: Sequence[str],
        alias: str,
    ) -> str:
        """A SELECT of one row per element of the array at `before` (in each row of the table), its one
        column `alias` the text at `after` inside the element."""
        raise InvalidArgument(f"{self.name} reads no paths through arrays here: unnest the array in SQL")

    def average(self, expr: str) -> str:
        return f"avg(CAST({expr} AS {self.double_type}))" if self.double_type else f"avg({expr})"

    def distinct_count(self, expr: str, approximate: bool) -> str:
        """count(DISTINCT …), or the approximate aggregate when asked for and the engine has one."""
        if approximate and self.approx_distinct:
            return self.approx_distinct.format(expr=expr)
        return f"count(DISTINCT {expr})"

    def explain(self, sql: str) -> str:
        return self.explain_prefix + sql

    @property
    def like_operator(self) -> str:
        """The case-insensitive LIKE: ILIKE skips lowering every long text first."""
        return "ILIKE" if self.ilike else "LIKE"

    def regex(self, expr: str, pattern_sql: str) -> str | None:
        return self.regex_match.format(expr=expr, pattern=pattern_sql) if self.regex_match else None

    def prefix(self, expr: str, chars: int) -> str:
        """The first `chars` characters of a value, so one huge cell cannot blow a result's byte cap."""
        return f"substr({self.as_text(expr)}, 1, {chars})"

    # -- fetching: what the driver hands to Python ---------------------------------------------------
    lossy_types: tuple[str, ...] = ()
    """Result types whose Python form loses information (DuckDB: INTERVAL becomes a timedelta, 1 month
    -> 30 days; TIMESTAMP_NS drops its nanoseconds): fetched as the engine's own text instead."""

    def cap_cell(self, expr: str, type_name: str, chars: int) -> CellCap | None:
        """How a cell of type `type_name` is cut by the engine, before the driver builds it in Python:
        whole when it is at most `chars` characters (bytes for binary values), else only a part that
        the fetch's own cut (fetch.cut_big_cells) still finds over the cap, so it marks and counts it:
        the first `chars` + 1 characters, or the first elements of a long list. None when values of
        the type are always small (numbers, dates) or the engine cannot cut it."""
        return None

    def infinite_flag(self, expr: str, type_name: str) -> str | None:
        """A boolean SQL expression true when `expr` is ±infinity, for the types whose infinity the
        driver hands over as an ordinary far date (DuckDB gives date.max for 'infinity' and for
        9999-12-31 alike); None where the driver tells them apart (or the engine has no infinity)."""
        return None

    def wrap_cells(self, sql: str, width: int, exprs: list[str]) -> str:
        """`sql` as a subquery whose `width` columns are named by position (`c0`, `c1`, …, whatever
        their names, duplicates too) under an outer select list `exprs` (cut cells, flags). The query's
        row order carries through the projection."""
        names = ", ".join(f"c{i}" for i in range(width))
        return f"SELECT {', '.join(exprs)} FROM (\n{sql}\n) AS flexsql_cells({names})"

    def sample_clause(self, table_sql: str, kind: str, pct_text: str) -> str | None:
        """The engine's sampling FROM item for a table (`kind` "table") or view, or None."""
        template = self.sample_table if kind == "table" else self.sample_view
        return template.format(table=table_sql, pct=pct_text) if template else None

    def needs_sample(self, row_estimate: int | None) -> bool:
        """Whether a table this big is sampled rather than scanned."""
        return (row_estimate or 0) > self.scan_above_rows

    def opens_path(self, path: str) -> bool:
        """Whether a file path (a `--db` given without a scheme) names a database of this engine."""
        return bool(self.file_suffixes) and PurePath(path).suffix.lower() in self.file_suffixes

    # the one instance of each engine class, kept in that class's own __dict__ (never inherited)
    _instance: ClassVar[Engine]

    def __new__(cls) -> Self:
        # stateless: one instance per engine class, so `DuckDB()` anywhere is the same object
        instance = cls.__dict__.get("_instance")
        if not isinstance(instance, cls):
            instance = super().__new__(cls)
            cls._instance = instance
        return instance

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


# -- lookup -------------------------------------------------------------------------------------

_lock = threading.Lock()
_engines: dict[str, Engine] | None = None


def engine_modules() -> list[str]:
    """The engine modules of this package: every `<name>_source` module."""
    package = importlib.import_module("flexsql.tools.engines")
    return sorted(
        f"flexsql.tools.engines.{m.name}"
        for m in pkgutil.iter_modules(package.__path__)
        if m.name.endswith("_source")
    )


def all_engines() -> dict[str, Engine]:
    """Every engine by dialect: the Engine subclasses of the engine modules, imported on first use
    (cheap: each imports its driver only on first connect)."""
    global _engines
    if _engines is not None:
        return _engines
    with _lock:
        if _engines is None:
            found: dict[str, Engine] = {}
            for module_name in engine_modules():
                module = importlib.import_module(module_name)
                classes = [
                    v
                    for v in vars(module).values()
                    if isinstance(v, type) and issubclass(v, Engine) and v.__module__ == module_name
                ]
                if len(classes) != 1:
                    raise ConfigError(
                        f"engine module {module_name} must define exactly one Engine subclass "
                        "(see flexsql.tools.engines.engine)"
                    )
                engine = classes[0]()
                found[engine.dialect] = engine
            _engines = found
        return _engines


def engine_for(dialect: str) -> Engine:
    known = all_engines()
    try:
        return known[dialect]
    except KeyError:
        raise ConfigError(f"no engine has dialect {dialect!r}; known: {', '.join(sorted(known))}") from None


def engine_for_url(url: str) -> Engine | None:
    """The engine a source URL opens, or None for a scheme no engine takes."""
    scheme = url.split("://", 1)[0].lower()
    return next((e for e in all_engines().values() if scheme in e.url_schemes), None)


def engine_for_path(path: str) -> Engine | None:
    """The one-file engine whose file suffix `path` has, or None."""
    return next((e for e in all_engines().values() if e.opens_path(path)), None)


def default_engine() -> Engine:
    """The embedded default engine: what a file of unknown kind is taken to be, and what serves
    the demo database."""
    return engine_for("duckdb")
