"""Sharded families: one logical table split into many (`GA_SESSIONS_20160801` … `GA_SESSIONS_20170801`),
named once for every tool and readable in SQL as one table.

Grouping (shared with search, tools/search/families.py): tables of one schema whose names differ only
in their digits form a shape group. A group whose shards all have the same column names is one family,
named by its pattern (`GA_SESSIONS_*`); a group with two or more column sets is that many families,
each named by the range of its shards (`GA_SESSIONS_20160801-20170630`), and the pattern still reads
all of them. Every name list_tables prints resolves (Catalog.resolve) and reads in SQL.

In SQL a family reference is a table name with `*` (a glob over the schema's table names:
`GA_SESSIONS_*`, `GA_SESSIONS_2017*`) or a family's range name. Source.execute replaces it, before
the guard and the engine, by the union of its shards aligned by column name (a column a shard lacks
reads NULL) (tools/sql/families.py finds the references). A statement's references are bounded
together, before anything is built: [limits] family_shards tables, [limits] family_cells cells
(tables × their union's columns) and the guard's characters (ExpansionBounds).
"""

from __future__ import annotations

import fnmatch
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.tools.engines.names import split_name
from flexsql.tools.sql.families import FamilyRef, family_refs, replace_refs
from flexsql.tools.sql.guard import MAX_SQL_CHARS

if TYPE_CHECKING:
    from flexsql.tools.engines.catalog import Catalog, Column, TableInfo
    from flexsql.tools.engines.engine import Engine

_DIGITS = re.compile(r"\d+")
MIN_COLUMN_OVERLAP = 0.5  # Jaccard of column names for two same-shape tables to be one search family


def shape(name: str) -> str:
    """The name with every digit run replaced by '#': members of a family share it."""
    return _DIGITS.sub("#", name.lower())


def digits_key(name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in _DIGITS.findall(name))


@dataclass
class Family:
    members: list[int]  # table indexes, ordered by their digits (oldest first)
    pattern: str  # e.g. GSOD* or CLINICAL_GDC_R*

    @property
    def latest(self) -> int:
        return self.members[-1]


def shape_groups(tables: Sequence[TableInfo]) -> list[list[int]]:
    """Indexes of the tables of one schema sharing a name shape with digits, two or more, oldest first."""
    by_shape: dict[tuple[str | None, str, str], list[int]] = defaultdict(list)
    for i, t in enumerate(tables):
        if _DIGITS.search(t.name):
            by_shape[(t.database, t.schema_name.lower(), shape(t.name))].append(i)
    out = []
    for idxs in by_shape.values():
        if len(idxs) >= 2:
            out.append(sorted(idxs, key=lambda i: (digits_key(tables[i].name), tables[i].name)))
    return out


def families(tables: Sequence[TableInfo]) -> list[Family]:
    """Search's families: shape groups split into clusters of similar columns (a release series whose
    columns drift stays one entry)."""
    out: list[Family] = []
    for idxs in shape_groups(tables):
        clusters: list[tuple[frozenset[str], list[int]]] = []
        for i in idxs:
            cols = frozenset(c.name.lower() for c in tables[i].columns)
            for rep, members in clusters:
                union = len(rep | cols) or 1
                if len(rep & cols) / union >= MIN_COLUMN_OVERLAP:
                    members.append(i)
                    break
            else:
                clusters.append((cols, [i]))
        for _, members in clusters:
            if len(members) >= 2:
                out.append(Family(members, pattern([tables[i].name for i in members])))
    return out


def pattern(names: list[str]) -> str:
    """GSOD2016, GSOD2017 -> GSOD*: the digit runs that differ become '*'; keeps the first name's case."""
    first = names[0]
    parts = _DIGITS.split(first)
    digits = [_DIGITS.findall(n) for n in names]
    out = parts[0]
    for k in range(len(parts) - 1):
        same = all(len(d) > k and d[k] == digits[0][k] for d in digits)
        out += (digits[0][k] if same else "*") + parts[k + 1]
    return out


def range_name(first: str, last: str) -> str:
    """GA_SESSIONS_20160801, GA_SESSIONS_20170630 -> GA_SESSIONS_20160801-20170630: the last name from
    the digit run where the two start to differ."""
    common = 0
    while common < min(len(first), len(last)) and first[common] == last[common]:
        common += 1
    while common > 0 and first[common - 1].isdigit():
        common -= 1
    return f"{first}-{last[common:]}"


@dataclass
class NamedFamily:
    name: str  # as list_tables prints it, without schema: GA_SESSIONS_* or GA_SESSIONS_20160801-20170630
    members: list[int]  # table indexes, oldest first
    group: str  # the pattern of its whole shape group (reads every column set)
    group_members: list[int]  # the whole shape group's table indexes, oldest first


def named_families(tables: Sequence[TableInfo]) -> list[NamedFamily]:
    """Every family as every tool names it: a shape group's tables split by their column names; a split
    group's families are named by range, a whole group by its pattern. Sets of one table stay tables."""
    out: list[NamedFamily] = []
    for idxs in shape_groups(tables):
        sets: dict[frozenset[str], list[int]] = {}
        for i in idxs:
            sets.setdefault(frozenset(c.name.lower() for c in tables[i].columns), []).append(i)
        group = pattern([tables[i].name for i in idxs])
        for members in sets.values():
            if len(members) < 2:
                continue
            if len(sets) == 1:
                name = group
            else:
                name = range_name(tables[members[0]].name, tables[members[-1]].name)
            out.append(NamedFamily(name, members, group, idxs))
    return out


def _named(catalog: Catalog) -> dict[tuple[str, str], list[int]]:
    """(schema key, family name) lower -> members, built once per catalog."""

    def build() -> dict[tuple[str, str], list[int]]:
        out: dict[tuple[str, str], list[int]] = {}
        for fam in named_families(catalog.tables):
            first = catalog.tables[fam.members[0]]
            out[(_schema_key(first), fam.name.lower())] = fam.members
            # a split group's pattern reads the whole group, not every table its glob would match
            out.setdefault((_schema_key(first), fam.group.lower()), fam.group_members)
        return out

    return catalog.derived("engines.families.named", build)


@dataclass(frozen=True)
class FamilyLabel:
    """The family a shard belongs to, as every tool names it (list_tables, describe_table, search_schema)."""

    name: str  # qualified: ANALYTICS.EVENTS_* or, for one column set of a split group, ANALYTICS.EVENTS_20180828-20181003
    size: int
    first: str  # its oldest and newest shard
    last: str
    group: str | None  # a split group's pattern, qualified (it reads every column set); None when not split
    group_size: int

    def reads_all(self) -> str:
        """'one column set of A.EVENTS_* (114 tables), which reads them all', or '' for a whole group."""
        return "" if self.group is None else reads_all(self.group, self.group_size)


def reads_all(group: str, size: int) -> str:
    """How every tool says that a split group's pattern reads each of its column sets."""
    return f"one column set of {group} ({size} tables), which reads them all"


def family_labels(tables: Sequence[TableInfo]) -> dict[str, FamilyLabel]:
    """qualified shard name -> the label of its family; shards whose columns no other shard shares have none."""
    out: dict[str, FamilyLabel] = {}
    for fam in named_families(tables):
        first = tables[fam.members[0]]
        prefix = first.qualified[: -len(first.name)]
        label = FamilyLabel(
            name=prefix + fam.name,
            size=len(fam.members),
            first=first.name,
            last=tables[fam.members[-1]].name,
            group=prefix + fam.group if fam.name != fam.group else None,
            group_size=len(fam.group_members),
        )
        for i in fam.members:
            out[tables[i].qualified] = label
    return out


def family_of(catalog: Catalog, table: TableInfo) -> FamilyLabel | None:
    """The family a shard belongs to, as list_tables names it."""
    labels = catalog.derived("engines.families.of", lambda: family_labels(catalog.tables))
    return labels.get(table.qualified)


def _schema_key(table: TableInfo) -> str:
    return ".".join(p for p in (table.database, table.schema_name) if p).lower()


def is_family_name(name: str) -> bool:
    """Whether a name's last part could name a family (a glob or a range name), before any lookup."""
    return "*" in name or bool(re.search(r"\d-\d+\W*$", name))


def family_members(catalog: Catalog, name: str) -> list[TableInfo] | None:
    """The shards a family name or glob reads, oldest first; None when the name is no family reference
    (a real table of that name wins). A glob that matches nothing raises NotFoundError."""
    parts = [p for p, _q in split_name(name)]
    if not parts or not is_family_name(parts[-1]):
        return None
    last = parts[-1].lower()
    wanted_schema = [p.lower() for p in parts[:-1]]

    def in_schema(t: TableInfo) -> bool:
        have = [p.lower() for p in (t.database, t.schema_name) if p]
        return len(wanted_schema) <= len(have) and have[-len(wanted_schema) :] == wanted_schema

    if wanted_schema:
        scopes = [[t for t in catalog.tables if in_schema(t)]]
    else:  # unqualified: the default schema first, as the engine resolves names, then every schema
        default = (catalog.default_schema or "").lower()
        scopes = [[t for t in catalog.tables if t.schema_name.lower() == default], list(catalog.tables)]
    by_name = _named(catalog)
    for scoped in scopes:
        if any(t.name.lower() == last for t in scoped):
            return None  # a table really named so
        for t in scoped:
            members = by_name.get((_schema_key(t), last))
            if members is not None:
                return [catalog.tables[i] for i in members]
        hits = [t for t in scoped if "*" in last and fnmatch.fnmatchcase(t.name.lower(), last)]
        schemas = {_schema_key(t) for t in hits}
        if len(schemas) > 1:
            raise InvalidArgument(
                f"family {name!r} matches tables in {len(schemas)} schemas "
                f"({', '.join(sorted(schemas)[:5])}); qualify it with its schema"
            )
        if hits:
            return sorted(hits, key=lambda t: (digits_key(t.name), t.name))
    if "*" not in last:
        return None
    raise NotFoundError(
        f"family {name!r} matches no table; {catalog.suggest(last.replace('*', ''))} "
        "(list_tables names every family)"
    )


def family_table(catalog: Catalog, name: str) -> TableInfo | None:
    """A family as one table: its shards' columns aligned by name (first spelling, first seen order),
    their summed row estimate; `shards` holds the members. None when `name` is no family reference."""
    members = family_members(catalog, name)
    if members is None:
        return None
    last = name.strip().split(".")[-1].strip('"')
    columns: dict[str, Column] = {}
    for t in members:
        for c in t.columns:
            columns.setdefault(c.name.lower(), c.model_copy(update={"primary_key": False}))
    rows, exact, source = summed_rows(members)
    first = members[0]
    return first.model_copy(
        update={
            "name": last,
            "columns": list(columns.values()),
            "foreign_keys": [],
            "row_estimate": rows,
            "rows_exact": exact,
            "rows_from": source,
            "shards": members,
        }
    )


def summed_rows(members: Sequence[TableInfo]) -> tuple[int | None, bool, str | None]:
    """A family's rows: the sum of its shards' (None when none has a figure), exact when every shard
    was counted, else an estimate from the first source an uncounted shard names."""
    figures = [t.row_estimate for t in members if t.row_estimate is not None]
    if not figures:
        return None, False, None
    exact = len(figures) == len(members) and all(t.rows_exact for t in members)
    source = None if exact else next((t.rows_from for t in members if not t.rows_exact and t.rows_from), None)
    return sum(figures), exact, source


# -- SQL ----------------------------------------------------------------------------------------------


class FamilyRead(BaseModel):
    """What one family reference of a statement read."""

    reference: str  # the family's name as every tool prints it: parts unquoted, as written (EVENTS_2018*)
    shards: list[str]  # table names read, oldest first

    def summary(self) -> str:
        span = self.shards[0] if len(self.shards) == 1 else f"{self.shards[0]} … {self.shards[-1]}"
        return f"{self.reference} read {len(self.shards)} table(s): {span}"


_TYPE_NAME = re.compile(r"[A-Za-z][\w ]*(?:\(\d+(?:,\s*\d+)?\))?(?:\[\])?")


@dataclass(frozen=True)
class ExpansionBounds:
    """What the family references of one statement may expand into, checked before anything is built:
    the shards all of them read together ([limits] family_shards), their unions' cells (each shard
    times its union's columns, a shard lacking one holding its NULL: [limits] family_cells), and the
    statement's characters (the most the guard checks)."""

    shards: int
    cells: int
    chars: int = MAX_SQL_CHARS


def _union_columns(shards: Sequence[TableInfo]) -> tuple[dict[str, str], dict[str, str]]:
    """The union's columns aligned by name: lower name -> first spelling, and -> first type."""
    names: dict[str, str] = {}
    types: dict[str, str] = {}
    for t in shards:
        for c in t.columns:
            names.setdefault(c.name.lower(), c.name)
            types.setdefault(c.name.lower(), c.type)
    return names, types


def union_sql(engine: Engine, shards: Sequence[TableInfo]) -> str:
    """SELECT … UNION ALL SELECT … over the shards, columns aligned by name; NULL where one lacks it."""
    union = _bounded_union(engine, shards, None)
    assert union is not None  # unbounded
    return union


def _bounded_union(engine: Engine, shards: Sequence[TableInfo], max_chars: int | None) -> str | None:
    """union_sql, or None as soon as it passes `max_chars` (the rest is never built)."""
    names, types = _union_columns(shards)
    branches = []
    size = 0
    for t in shards:
        own = {c.name.lower(): c.name for c in t.columns}
        items = []
        for key, shown in names.items():
            if key not in own:
                # typed, so that a union whose first shard lacks a JSON column still types it as JSON
                typed = _TYPE_NAME.fullmatch(types[key]) is not None
                null = f"CAST(NULL AS {types[key]})" if typed else "NULL"
                items.append(f"{null} AS {engine.quote(shown)}")
            elif own[key] != shown:
                items.append(f"{engine.quote(own[key])} AS {engine.quote(shown)}")
            else:
                items.append(engine.quote(shown))
        branch = f"SELECT {', '.join(items)} FROM {engine.quote_table(t.model_copy(update={'shards': []}))}"
        size += len(branch) + 11
        if max_chars is not None and size > max_chars:
            return None
        branches.append(branch)
    return "\nUNION ALL\n".join(branches)


def _default_alias(ref: FamilyRef) -> str:
    text = ref.parts[-1][0]
    text = re.sub(r"-\d+$", "", text).replace("*", "").rstrip("_")
    return text if re.fullmatch(r"[A-Za-z_][\w$]*", text) else "family"


def expand_families(
    sql: str,
    catalog_of: Callable[[], Catalog],
    engine: Engine,
    bounds: ExpansionBounds,
    check: Callable[[], object] | None = None,
) -> tuple[str, list[FamilyRead]]:
    """`sql` with each family reference replaced by the union of its shards, and what each read.
    `catalog_of` gives the catalog, loaded only when the SQL holds a reference. Every reference is
    resolved and counted against `bounds` first: a statement past them is refused before any union
    is built (a quoted "*" names every table of a schema, and each table may bring its own columns).
    `check` runs between references (and may raise: the statement's timeout, a cancelled call), as a
    name is resolved against every table of a catalog that may hold 100,000."""
    if len(sql) > bounds.chars:
        return sql, []  # the guard refuses it by its length, before anything reads it
    refs = family_refs(sql, engine.dialect)
    if not refs:
        return sql, []
    catalog = catalog_of()
    planned: list[tuple[FamilyRef, str, list[TableInfo]]] = []
    shards = 0
    for ref in refs:
        if check is not None:
            check()
        if shards > bounds.shards:
            break  # refused below, with the counts so far
        name = ".".join(p for p, _q in ref.parts)
        try:
            members = family_members(catalog, ".".join(_requote(p, q) for p, q in ref.parts))
        except NotFoundError:
            if ref.in_from:
                raise
            continue
        if members is not None:
            planned.append((ref, name, members))
            shards += len(members)
    _check_bounds(planned, bounds)
    reads: list[FamilyRead] = []
    chosen: list[FamilyRef] = []
    unions: list[str] = []
    room = bounds.chars - len(sql)
    for ref, name, members in planned:
        alias = "" if ref.has_alias else f" AS {_default_alias(ref)}"
        body = _bounded_union(engine, members, max(room, 0))
        union = f"(\n{body}\n){alias}"
        room -= len(union) - len(ref.text)
        if body is None or room < 0:
            raise InvalidArgument(
                f"the statement's family references would expand into more than {bounds.chars:,} characters "
                "of SQL, the most the guard checks: name fewer shards (a longer prefix) or fewer columns"
            )
        chosen.append(ref)
        unions.append(union)
        # plain parts, not the SQL's quoting: sample_rows quotes what it builds, run_query rarely does
        reads.append(FamilyRead(reference=name, shards=[t.name for t in members]))
    return replace_refs(sql, chosen, unions), reads


def _check_bounds(planned: list[tuple[FamilyRef, str, list[TableInfo]]], bounds: ExpansionBounds) -> None:
    """Refuse a statement whose references read more shards, or unite more cells, than `bounds` allow."""
    shards = sum(len(members) for _, _, members in planned)
    if shards > bounds.shards:
        biggest = max(planned, key=lambda p: len(p[2]))
        each = ", ".join(f"{name} {len(members):,}" for _, name, members in planned[:4])
        more = f" and {len(planned) - 4} more" if len(planned) > 4 else ""
        raise InvalidArgument(
            f"the family references of this statement read {shards:,} tables ({each}{more}), more than the "
            f"{bounds.shards:,} one statement may read ([limits] family_shards): narrow them with a longer "
            f"prefix (e.g. {_narrower(biggest[2])}*) or raise the limit"
        )
    cells = 0
    for _, name, members in planned:
        width = len(_union_columns(members)[0])
        cells += width * len(members)
        if cells > bounds.cells:
            raise InvalidArgument(
                f"family {name} unites {len(members):,} tables of {width:,} distinct columns: "
                f"{len(members) * width:,} cells (tables × columns{', with the other references: ' + format(cells, ',') if cells != len(members) * width else ''}), "
                f"more than the {bounds.cells:,} one statement may expand into ([limits] family_cells): "
                f"name fewer tables (a longer prefix, e.g. {_narrower(members)}*) or the shards you need"
            )


def _requote(part: str, quoted: bool) -> str:
    return '"' + part.replace('"', '""') + '"' if quoted else part


def _narrower(members: Sequence[TableInfo]) -> str:
    """A longer prefix of the last shard's name: its name up to the year of its digits."""
    name = members[-1].name
    m = re.search(r"\d{4}", name)
    return name[: m.end()] if m else name[:-2]


__all__ = [
    "ExpansionBounds",
    "Family",
    "FamilyLabel",
    "FamilyRead",
    "NamedFamily",
    "digits_key",
    "expand_families",
    "families",
    "family_labels",
    "family_members",
    "family_of",
    "family_table",
    "is_family_name",
    "named_families",
    "pattern",
    "reads_all",
    "shape",
    "summed_rows",
    "union_sql",
]
