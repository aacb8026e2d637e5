"""Join links between tables: the declared foreign keys, and links inferred from names — the one place
both find_join_path (tools/joins.py), describe_table and search_schema read them from.

Warehouses (Snowflake, BigQuery exports) and many application databases declare no keys, yet their
tables join all the same. A small set of general rules reads the links from names, each inferred link
carrying a short label saying why:

- same name: `dogs.breed_code` and `breeds.breed_code` ("same name and type"), pointing at the table
  where the column is the key (declared, named after its table, `id`, or a key-like first column);
- `<x>_id` / `<x>_code` / `<x>_key` / `<x>no` names table x, singular or plural, or a table whose name
  ends with x or begins with it (`stuid` -> student) ("<x>_id names table x");
- role words stripped: `current_address_id`, `permanent_address_id`, `team_id_winner`, `src_apid`
  ("role prefix current_ stripped");
- a column named after a table points at that table's key: `flights.airline` -> `airlines.uid`,
  `flights.sourceairport` -> `airports.airportcode` ("named after table airlines");
- a column named table + column: `city.countrycode` -> `country.code`.

Types must be compatible (numbers with numbers, text with text; unknown types match anything).
Shared names that many tables carry (`created_at`, `customer_id` in 30 tables) link each table to the
table that owns the key, never every pair. Links are ranked by `weight` (declared 1.0); sampled values
confirm or demote an inferred link afterwards, or find one where no name does (key_values.py).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from flexsql.tools.engines import Catalog, Column, TableInfo
from flexsql.tools.values.normalize import split_identifier

_KEY = re.compile(r"^(?P<entity>.+?)_?(?:id|key)$", re.IGNORECASE)
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
# the words a key column's name ends with: `<entity>_id`, `breed_code`, `flno`
KEY_SUFFIXES = ("id", "code", "key", "no", "num", "number", "nbr")
# a bare suffix says nothing of what it points at: `id` = `id` joins nothing
_GENERIC = frozenset(KEY_SUFFIXES) | {"uuid", "pk", "name", "type", "value"}


@dataclass(frozen=True)
class LinkRules:
    """Weights of the name rules (confidence in (0, 1]; declared keys are 1.0). Tuned on half the Spider
    databases and checked on the other half (benchmarks/join_inference.py)."""

    same_key: float = 0.9  # same name; the column is the key of the referenced table
    same_both: float = 0.8  # same name; it is the key of both tables (1:1, or a shared key)
    same_sibling: float = 0.5  # same key-like name (`club_id`), the key of neither: siblings
    same_weak: float = 0.35  # same name, not key-like, the key of neither (a shared attribute)
    entity: float = 0.85  # `<x>_id` names table x
    named_after: float = 0.75  # a column named after a table points at its key
    role: float = 0.9  # factor when a role word had to be stripped first
    tail: float = 0.85  # factor when x names only the end of the table's name (`ref_template_types`)
    abbreviation: float = 0.75  # factor when x only begins the table's name (`stuid` -> student)
    first_column: float = 0.6  # a table with no key-like name: its first column is taken for its key
    type_mismatch: float = 0.0  # factor for a number joined to text (0: never)
    confirmed: float = 0.3  # share of the way to 1 a link gains when its sampled values are found
    denied: float = 0.4  # factor of a link whose sampled values are mostly missing
    value_only: float = 0.5  # a link only values show (between tables no name connects), times the overlap
    shared_cap: int = 4  # a name shared by more tables links only to the table that owns the key
    min_weight: float = 0.3  # links below this are not kept


RULES = LinkRules()


@dataclass(frozen=True)
class KeyLink:
    """`tables[table].columns = tables[ref_table].ref_columns`: the referencing side first."""

    table: int
    columns: tuple[str, ...]
    ref_table: int
    ref_columns: tuple[str, ...]
    kind: str  # "declared" or "inferred"
    evidence: str  # why: "declared", "same name and type", "role prefix current_ stripped", ...
    weight: float  # 1.0 for declared keys; inferred links below

    @property
    def declared(self) -> bool:
        return self.kind == "declared"

    def pair(self) -> tuple[int, int]:
        return (self.table, self.ref_table) if self.table <= self.ref_table else (self.ref_table, self.table)

    def column_pairs(self) -> frozenset[tuple[tuple[int, str], tuple[int, str]]]:
        """The condition as a set of unordered column pairs (lower-case), for comparing links."""
        out = set()
        for a, b in zip(self.columns, self.ref_columns, strict=False):
            x, y = (self.table, a.lower()), (self.ref_table, b.lower())
            out.add((x, y) if x <= y else (y, x))
        return frozenset(out)


# -- names ------------------------------------------------------------------------------------------


@lru_cache(maxsize=1 << 16)
def _words(name: str) -> tuple[str, ...]:
    """An identifier's words, lower-case: 'StuID' -> ('stu', 'id') (cached: wide catalogs repeat names)."""
    return tuple(split_identifier(name))


def _norm(name: str) -> str:
    return "".join(_words(name))


def _entity_forms(word: str) -> set[str]:
    """'races' -> {'races', 'race'}; 'categories' -> {'categories', 'category'}; 'race' -> +'races'."""
    out = {word}
    if word.endswith("ies") and len(word) > 4:
        out.add(word[:-3] + "y")
    if word.endswith("es") and len(word) > 4:
        out.add(word[:-2])
    if word.endswith("s") and len(word) > 3 and not word.endswith("ss"):
        out.add(word[:-1])
    if not word.endswith("s"):
        out.add(word + "s")
        if word.endswith("y") and len(word) > 3:
            out.add(word[:-1] + "ies")
    return out


def key_entity(column: str) -> str | None:
    """'race_id' / 'raceId' / 'RaceID' / 'person_key' -> 'race' / 'person'; None for plain `id`."""
    m = _KEY.match(column)
    if not m:
        return None
    entity = _NON_ALNUM.sub("", m.group("entity").lower())
    return entity if len(entity) >= 3 else None


def _split_key(words: list[str]) -> tuple[str, str] | None:
    """(entity, suffix) of a key-like name: ['breed', 'code'] -> ('breed', 'code'); ['stuid'] ->
    ('stu', 'id'); None when the name carries no key suffix or the entity is shorter than 2 letters."""
    if len(words) >= 2 and words[-1] in KEY_SUFFIXES:
        entity = "".join(words[:-1])
        return (entity, words[-1]) if len(entity) >= 2 else None
    if len(words) == 1:
        word = words[0]
        for suffix in ("id", "key", "code", "no", "num"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                return word[: -len(suffix)], suffix
    return None


_NUMBER = re.compile(r"int|num|dec|real|floa|doub|serial|money")
_BOOL = re.compile(r"bool|^bit$")
_TEXT = re.compile(r"char|text|string|clob|uuid")
_TIME = re.compile(r"date|time")


def type_family(declared: str) -> str:
    """'number', 'text', 'time', 'bool' or '' (unknown, matches anything) of an engine's column type."""
    t = declared.lower()
    if not t or "variant" in t or "blob" in t:
        return ""
    if _TIME.search(t):
        return "time"
    if _BOOL.search(t):
        return "bool"
    if _NUMBER.search(t):
        return "number"
    if _TEXT.search(t):
        return "text"
    return ""


def compatible(a: Column, b: Column) -> bool:
    fa, fb = type_family(a.type), type_family(b.type)
    return not fa or not fb or fa == fb


# -- the tables of one schema -----------------------------------------------------------------------


@dataclass
class _Table:
    index: int
    info: TableInfo
    words: list[str]  # the name's words
    columns: dict[str, Column]  # normalized name -> column
    keys: dict[str, float]  # normalized column name -> how surely it is the table's key


class _Schema:
    """Name lookups over the tables of one schema."""

    def __init__(self, members: list[tuple[int, TableInfo, str]], rules: LinkRules) -> None:
        self.rules = rules
        self.tables: list[_Table] = []
        self.exact: dict[str, set[int]] = defaultdict(set)  # a table's name (or its singular/plural)
        self.tails: dict[str, set[int]] = defaultdict(set)  # the end of a table's name
        self.prefixes: dict[str, set[int]] = defaultdict(set)  # the start of one (3+ letters)
        for pos, (index, info, name) in enumerate(members):
            words = list(_words(re.sub(r"\*", "", name))) or [name.lower()]
            words = [w for w in words if not w.isdigit()] or words
            table = _Table(index, info, words, {}, {})
            for col in info.columns:
                table.columns.setdefault(_norm(col.name), col)
            self.tables.append(table)
            joined = "".join(words)
            for form in _entity_forms(joined):
                self.exact[form].add(pos)
            for k in range(1, len(words)):
                tail = "".join(words[k:])
                if len(tail) >= 4:
                    for form in _entity_forms(tail):
                        self.tails[form].add(pos)
            for k in range(3, len(joined)):
                self.prefixes[joined[:k]].add(pos)
        self.key_owners: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for pos, table in enumerate(self.tables):
            table.keys = self._keys(pos, table)
            for name, sure in table.keys.items():
                self.key_owners[name].append((pos, sure))

    def designated(self, entity: str, plural: bool = True) -> list[tuple[int, float]]:
        """Tables a word names: (position, strength); the exact name wins over its end or its start.
        Without `plural`, a plural word names none (a column `customers` or `up_votes` is a count or a
        list more often than a reference)."""
        if entity in _GENERIC or len(entity) < 2 or not plural and _plural(entity):
            return []
        hits = self.exact.get(entity)
        if hits:
            return [(p, 1.0) for p in sorted(hits)]
        if len(entity) < 3:
            return []
        hits = self.tails.get(entity) if self.rules.tail > 0 else None
        if hits:
            return [(p, self.rules.tail) for p in sorted(hits)]
        hits = self.prefixes.get(entity)
        if hits and len(hits) == 1 and self.rules.abbreviation > 0:
            return [(p, self.rules.abbreviation) for p in sorted(hits)]
        return []

    def _keys(self, pos: int, table: _Table) -> dict[str, float]:
        """The columns that look like the table's own key, and how surely."""
        pk = table.info.primary_key
        if len(pk) == 1:
            return {_norm(pk[0]): 1.0}
        if pk:  # a composite key: its parts point elsewhere (link tables)
            return {}
        keys: dict[str, float] = {}
        for i, col in enumerate(table.info.columns):
            name = _norm(col.name)
            words = list(_words(col.name))
            split = _split_key(words)
            if name in ("id", "uuid"):
                keys[name] = max(keys.get(name, 0.0), 0.95)
            elif split and any(p == pos for p, _ in self.designated(split[0])):
                keys[name] = max(keys.get(name, 0.0), 0.9)
            elif i == 0 and (split or name.endswith(KEY_SUFFIXES)):
                keys[name] = max(keys.get(name, 0.0), 0.8)
        if not keys and table.info.columns and self.rules.first_column:
            keys[_norm(table.info.columns[0].name)] = self.rules.first_column
        return keys

    def key_of(self, pos: int) -> list[tuple[str, float]]:
        table = self.tables[pos]
        return sorted(table.keys.items(), key=lambda kv: -kv[1])


def _plural(word: str) -> bool:
    """'customers', 'votes' (not 'address', 'status', 'campus', 'analysis')."""
    return word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _cores(words: list[str]) -> list[tuple[list[str], str]]:
    """The name itself, then with role words stripped from the front or the back, and a label each:
    ['current', 'address', 'id'] -> [(.., ''), (['address', 'id'], 'role prefix current_ stripped'), ...]."""
    out: list[tuple[list[str], str]] = [(words, "")]
    for k in range(1, len(words)):
        rest = words[k:]
        if rest and not (len(rest) == 1 and rest[0] in _GENERIC):
            out.append((rest, f"role prefix {'_'.join(words[:k])}_ stripped"))
    for k in range(len(words) - 1, 0, -1):
        rest = words[:k]
        if rest[-1] in KEY_SUFFIXES and len(rest) >= 2:  # `team_id_winner`: a role after the key
            out.append((rest, f"role suffix _{'_'.join(words[k:])} stripped"))
    return out


def _suffix_tables(schema: _Schema, name: str) -> list[tuple[int, str]]:
    """Tables whose name ends the column's glued name after a role word: `sourceairport` -> airports."""
    out = []
    for i in range(2, len(name) - 3):
        for p in sorted(schema.exact.get(name[i:], ())):
            out.append((p, name[:i]))
        if out:
            break
    return out


# -- the links --------------------------------------------------------------------------------------


def _declared(tables: Sequence[TableInfo]) -> list[KeyLink]:
    by_name: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(tables):
        by_name[t.name.lower()].append(i)
    out: list[KeyLink] = []
    for i, t in enumerate(tables):
        for fk in t.foreign_keys:
            candidates = by_name.get(fk.ref_table.lower(), [])
            same = [
                j
                for j in candidates
                if tables[j].database == t.database
                and (fk.ref_schema or t.schema_name) in (tables[j].schema_name, None)
            ]
            targets = same or candidates
            if not targets:
                continue
            ref = tables[targets[0]]
            ref_cols = fk.ref_columns or ref.primary_key
            if not ref_cols or len(ref_cols) != len(fk.columns):
                ref_cols = ref.primary_key if len(ref.primary_key) == len(fk.columns) else fk.columns
            out.append(
                KeyLink(i, tuple(fk.columns), targets[0], tuple(ref_cols), "declared", "declared", 1.0)
            )
    return out


class _Found:
    """The inferred links of one schema, the best reason kept per column pair."""

    def __init__(self, schema: _Schema) -> None:
        self.schema = schema
        self.links: dict[tuple[int, str, int, str], tuple[float, str]] = {}

    def offer(self, src: int, col: Column, dst: int, ref: Column, weight: float, why: str) -> None:
        r = self.schema.rules
        if not compatible(col, ref):
            weight *= r.type_mismatch
        if src == dst or weight < r.min_weight:
            return
        a, b = self.schema.tables[src].index, self.schema.tables[dst].index
        key = (a, col.name, b, ref.name)
        mirror = (b, ref.name, a, col.name)
        if mirror in self.links:  # one direction per column pair: the surer one
            if self.links[mirror][0] >= weight:
                return
            del self.links[mirror]
        if key not in self.links or self.links[key][0] < weight:
            self.links[key] = (weight, why)

    def same(self, src: int, dst: int, name: str, weight: float) -> None:
        a, b = self.schema.tables[src], self.schema.tables[dst]
        self.offer(src, a.columns[name], dst, b.columns[name], weight, "same name and type")


def _same_names(schema: _Schema, found: _Found) -> None:
    """Columns of one name in several tables: each points at the table(s) owning the key; siblings and
    1:1 pairs link directly only when few tables share the name."""
    r = schema.rules
    sharing: dict[str, list[int]] = defaultdict(list)
    for pos, table in enumerate(schema.tables):
        for name in table.columns:
            if name not in _GENERIC and len(name) >= 2:
                sharing[name].append(pos)
    for name, members in sharing.items():
        if len(members) < 2:
            continue
        words = list(_words(schema.tables[members[0]].columns[name].name))
        split = _split_key(words)
        named = {p for p, _ in schema.designated(split[0])} if split else set()
        named |= {p for p, _ in schema.designated(name)}
        sure = {p: 1.0 if p in named else schema.tables[p].keys.get(name, 0.0) for p in members}
        owners = [p for p in members if sure[p] > 0]
        if len(owners) > r.shared_cap and named & set(owners):  # many keys of one name: the named one
            owners = [p for p in owners if p in named]
        others = [p for p in members if p not in owners]
        small = len(members) <= r.shared_cap
        if len(owners) > r.shared_cap:  # a name that is the key of many tables says nothing of who joins
            continue
        sibling = r.same_sibling if split or name.endswith(KEY_SUFFIXES) else r.same_weak
        for src in others:
            for dst in owners:
                found.same(src, dst, name, r.same_key * sure[dst])
            if small:
                for dst in others:
                    if dst > src:
                        found.same(src, dst, name, sibling)
        for i, src in enumerate(owners):
            for dst in owners[i + 1 :]:
                if small or src in named or dst in named:
                    # 1:1: point at the table the name designates, when one does
                    a, b = (dst, src) if src in named and dst not in named else (src, dst)
                    found.same(a, b, name, r.same_both * min(sure[src], sure[dst]))


_Target = tuple[int, Column, float, str]
"""(table position, the column pointed at, weight, why)."""


def _designating_names(schema: _Schema, found: _Found) -> None:
    """Names that designate another table: `<x>_id`, role words, named after a table, table + column.
    Worked out once per distinct name (wide catalogs repeat them across hundreds of tables)."""
    cache: dict[str, tuple[list[list[_Target]], list[_Target]]] = {}
    for pos, table in enumerate(schema.tables):
        for col in table.info.columns:
            if col.name not in cache:
                words = list(_words(col.name))
                cache[col.name] = (_by_cores(schema, words), _glued(schema, words)) if words else ([], [])
            cores, glued = cache[col.name]
            for targets in cores:  # the first form of the name that designates another table
                hits = [t for t in targets if t[0] != pos]
                for dst, ref, weight, why in hits:
                    found.offer(pos, col, dst, ref, weight, why)
                if hits:
                    break
            for dst, ref, weight, why in glued:
                if dst != pos:
                    found.offer(pos, col, dst, ref, weight, why)


def _by_cores(schema: _Schema, words: list[str]) -> list[list[_Target]]:
    """What each form of the name (as it is, then with role words stripped) designates."""
    r = schema.rules
    out: list[list[_Target]] = []
    for core, role in _cores(words):
        factor = r.role if role else 1.0
        core_name = "".join(core)
        split = _split_key(core)
        targets: list[_Target] = []
        if split:  # `<x>_id` names table x
            entity, suffix = split
            for dst, strength in schema.designated(entity):
                target = _target_column(schema, dst, core_name, suffix)
                if target is not None:
                    ref, sure = target
                    why = role or f"{entity}_{suffix} names table {schema.tables[dst].info.name}"
                    targets.append((dst, ref, r.entity * strength * sure * factor, why))
        elif core_name not in _GENERIC:
            if role:  # a stripped name equal to another table's key: `src_apid` -> airports.apid
                for dst, sure in schema.key_owners.get(core_name, []):
                    if sure >= 0.8:
                        ref = schema.tables[dst].columns[core_name]
                        targets.append((dst, ref, r.same_key * sure * factor, role))
            for dst, strength in schema.designated(core_name, plural=False):  # named after a table
                for key, sure in schema.key_of(dst)[:1]:
                    why = role or f"named after table {schema.tables[dst].info.name}"
                    weight = r.named_after * strength * sure * factor
                    targets.append((dst, schema.tables[dst].columns[key], weight, why))
        if targets:
            out.append(targets)
    return out


def _glued(schema: _Schema, words: list[str]) -> list[_Target]:
    """Names glued without separators: a role word before a table's name (`sourceairport` -> airports),
    a table's name before one of its key columns (`countrycode` -> country.code)."""
    r = schema.rules
    name = "".join(words)
    out: list[_Target] = []
    if len(words) == 1 and not schema.designated(name):
        for dst, role_word in _suffix_tables(schema, name):
            for key, sure in schema.key_of(dst)[:1]:
                why = f"role prefix {role_word} stripped"
                out.append((dst, schema.tables[dst].columns[key], r.named_after * sure * r.role, why))
    for i in range(3, len(name) - 1):
        for dst in sorted(schema.exact.get(name[:i], ())):
            other = schema.tables[dst]
            ref = other.columns.get(name[i:])
            if ref is not None and name[i:] in other.keys:
                out.append((dst, ref, r.entity, f"table {other.info.name} + column {ref.name}"))
    return out


def _infer_schema(schema: _Schema) -> list[KeyLink]:
    found = _Found(schema)
    _same_names(schema, found)
    _designating_names(schema, found)
    return [
        KeyLink(a, (col,), b, (ref,), "inferred", why, round(weight, 4))
        for (a, col, b, ref), (weight, why) in found.links.items()
    ]


def _table_forms(table: _Table) -> set[str]:
    return {f for f in _entity_forms("".join(table.words)) if len(f) >= 3}


def _target_column(schema: _Schema, dst: int, name: str, suffix: str) -> tuple[Column, float] | None:
    """The column of table `dst` a `<x>_<suffix>` column points at: one of the same name, the table's key,
    or one named like the suffix (`code`, `id`); with how surely."""
    table = schema.tables[dst]
    same = table.columns.get(name)
    if same is not None:
        return same, 1.0 if name in table.keys else 0.9
    for key, sure in schema.key_of(dst):
        if _split_key(list(_words(key))) and key.endswith(suffix) or key == suffix:
            return table.columns[key], sure
    plain = table.columns.get(suffix)
    if plain is not None:
        return plain, 0.9
    keys = schema.key_of(dst)
    if keys:
        return table.columns[keys[0][0]], keys[0][1] * 0.9
    return None


def key_links(
    tables: Sequence[TableInfo],
    schema_of: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    rules: LinkRules | None = None,
    infer: bool = True,
) -> list[KeyLink]:
    """Every declared foreign key, and (with `infer`) every link inferred from names, best first within a
    pair of tables. `schema_of[i]` groups the tables (inferred links never cross groups; default: by
    database and schema); `names[i]`, when given, is the name a table is known by (a family's pattern)."""
    if not infer:
        return _declared(tables)
    return _links_and_keys(tables, schema_of, names, rules or RULES)[0]


def _links_and_keys(
    tables: Sequence[TableInfo],
    schema_of: Sequence[int] | None,
    names: Sequence[str] | None,
    rules: LinkRules,
) -> tuple[list[KeyLink], dict[int, list[tuple[str, float]]]]:
    """key_links(), and each table's key columns (declared, or inferred: name, surety)."""
    declared = _declared(tables)
    keys: dict[int, list[tuple[str, float]]] = {}
    if schema_of is None:
        groups: dict[tuple[str | None, str], int] = {}
        schema_of = [groups.setdefault((t.database, t.schema_name), len(groups)) for t in tables]
    members: dict[int, list[tuple[int, TableInfo, str]]] = defaultdict(list)
    for i, t in enumerate(tables):
        members[schema_of[i]].append((i, t, names[i] if names is not None else t.name))
    known = {link.column_pairs() for link in declared}
    out = list(declared)
    for group in members.values():
        schema = _Schema(group, rules)
        for pos, table in enumerate(schema.tables):
            keys[table.index] = [(table.columns[name].name, sure) for name, sure in schema.key_of(pos)]
        if len(group) < 2:
            continue
        for link in _infer_schema(schema):
            if link.column_pairs() not in known:
                known.add(link.column_pairs())
                out.append(link)
    out.sort(key=lambda link: (link.pair(), -link.weight))
    return out, keys


def inferred_links(
    tables: Sequence[TableInfo], schema_of: Sequence[int], names: Sequence[str] | None = None
) -> list[tuple[int, int, str]]:
    """(referencing table, referenced table, column) for the links inferred from names, one per pair of
    tables (the surest), for search: declared keys are read from the catalog directly."""
    out: list[tuple[int, int, str]] = []
    seen: set[tuple[int, int]] = set()
    links = [link for link in key_links(tables, schema_of, names) if not link.declared]
    links.sort(key=lambda link: -link.weight)
    for link in links:
        if link.weight <= SEARCH_MIN_WEIGHT or link.pair() in seen:
            continue
        seen.add(link.pair())
        out.append((link.table, link.ref_table, link.columns[0]))
    return out


# search lifts a table through a link only when the name says it plainly: above a sibling's weight (two
# tables that share a person_id both point at person; they are not each other's way to it)
SEARCH_MIN_WEIGHT = LinkRules.same_sibling


def link_counts(links: Sequence[tuple[int, int, str]]) -> dict[int, int]:
    """How many tables reference each table (hubs: people, orders, races)."""
    counts: dict[int, int] = defaultdict(int)
    for _, target, _ in links:
        counts[target] += 1
    return dict(counts)


# -- a catalog's links ------------------------------------------------------------------------------


@dataclass
class CatalogLinks:
    """A catalog's links indexed for path finding: by pair of table positions (smaller first), best
    first; and each table's neighbours."""

    links: list[KeyLink]
    pairs: dict[tuple[int, int], list[KeyLink]]
    neighbours: dict[int, list[int]]
    keys: dict[int, list[tuple[str, float]]]  # each table's key columns, surest first
    referencing: frozenset[tuple[int, str]]  # (table, lower-case column) that reference another table

    def of_table(self, position: int) -> list[KeyLink]:
        """The links where the table is the referencing side, best first."""
        out = [
            link
            for nb in self.neighbours.get(position, [])
            for link in self.pairs[(min(position, nb), max(position, nb))]
            if link.table == position
        ]
        out.sort(key=lambda link: -link.weight)
        return out


def catalog_links(catalog: Catalog) -> CatalogLinks:
    """Declared and inferred links of a catalog, computed once per catalog load."""

    def build() -> CatalogLinks:
        links, keys = _links_and_keys(catalog.tables, None, None, RULES)
        pairs: dict[tuple[int, int], list[KeyLink]] = defaultdict(list)
        neighbours: dict[int, list[int]] = defaultdict(list)
        for link in links:
            pair = link.pair()
            if pair[0] == pair[1]:
                continue
            if pair not in pairs:
                neighbours[pair[0]].append(pair[1])
                neighbours[pair[1]].append(pair[0])
            pairs[pair].append(link)
        for found in pairs.values():
            found.sort(key=lambda link: -link.weight)
        referencing = frozenset((link.table, c.lower()) for link in links for c in link.columns)
        return CatalogLinks(links, dict(pairs), dict(neighbours), keys, referencing)

    return catalog.derived("key_links", build)


__all__ = [
    "KEY_SUFFIXES",
    "RULES",
    "CatalogLinks",
    "KeyLink",
    "LinkRules",
    "catalog_links",
    "compatible",
    "inferred_links",
    "key_entity",
    "key_links",
    "link_counts",
    "type_family",
]
