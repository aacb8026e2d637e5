"""Family references in SQL text: a table name in FROM/JOIN (or a FROM list) whose last part holds a `*`
(`GA_SESSIONS_*`, `web."events_2017*"`) or ends in a digit range (`GA_SESSIONS_20160801-20170630`).

Only the text is read here; tools/engines/families.py decides which references name a family and what
replaces them. Strings, comments and dollar-quoted bodies are masked first, as the dialect's tokenizer
reads them (backslash escapes included), so a `*` inside them is never a reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import TokenType
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

# one name part: a quoted identifier, or an unquoted one that may hold '*' and end in a digit range
_PART = r'(?:"(?:[^"]|"")*"|`[^`]*`|[A-Za-z_*][\w$*]*(?:-\d+)?)'
_REF = re.compile(
    rf"(?P<lead>\b(?:FROM|JOIN)\s+|,\s*)(?P<name>(?:{_PART}\s*\.\s*){{0,2}}{_PART})(?=\s|$|\)|,|;)",
    re.IGNORECASE,
)
_MAYBE = re.compile(r'[\w$"]\*|\d-\d')
_ALIAS = re.compile(r'\s+(?:(AS)\s+)?("(?:[^"]|"")+"|[A-Za-z_][\w$]*)', re.IGNORECASE)
# words that may follow a table reference without being its alias
_NOT_ALIAS = {
    "where", "join", "inner", "left", "right", "full", "outer", "cross", "natural", "on", "using",
    "group", "order", "limit", "having", "window", "qualify", "union", "except", "intersect", "minus",
    "offset", "fetch", "tablesample", "sample", "lateral", "asof", "positional", "semi", "anti",
    "pivot", "unpivot", "for", "into", "with", "start", "connect", "match_recognize", "at", "before",
    "changes", "values", "select",
}  # fmt: skip


# every kind of literal the tokenizers read as one token: blanked, so no `*` inside is a reference
_STRING_TOKENS = frozenset(
    getattr(TokenType, name)
    for name in (
        "STRING", "NATIONAL_STRING", "RAW_STRING", "BIT_STRING", "BYTE_STRING", "HEX_STRING",
        "HEREDOC_STRING", "UNICODE_STRING",
    )
    if hasattr(TokenType, name)
)  # fmt: skip


@dataclass(frozen=True)
class FamilyRef:
    start: int  # span of the name in the SQL text
    end: int
    text: str  # the name as written
    parts: tuple[tuple[str, bool], ...]  # (part, quoted), quotes removed
    has_alias: bool  # an alias follows: the replacement must not add one
    in_from: bool  # after FROM or JOIN (not only after a comma)


def mask(sql: str, dialect: str = "") -> str:
    """`sql` with string literals and comments blanked (same length, a string's quotes kept), as the
    dialect's tokenizer reads them: sqlglot's, the one the guard parses with, so an escape it honours
    (`E'\\''` on PostgreSQL and DuckDB, `'\\''` on Snowflake, `$tag$ … $tag$`) ends no string here
    either. Text the tokenizer cannot read (an unterminated string) is masked whole: it names no
    family, and the guard then says what is wrong with it."""
    try:
        tokens = Dialect.get_or_raise(dialect or None).tokenize(sql)
    except (SqlglotError, ValueError, RecursionError):
        return " " * len(sql)
    out = [" "] * len(sql)
    for token in tokens:
        start, end = token.start, token.end + 1
        if token.token_type in _STRING_TOKENS:
            out[start], out[end - 1] = sql[start], sql[end - 1]  # its delimiters, not its text
        else:
            out[start:end] = sql[start:end]
    return "".join(out)


def _parts(name: str) -> tuple[tuple[str, bool], ...]:
    found = re.findall(r'"((?:[^"]|"")*)"|`([^`]*)`|([^."`\s]+)', name)
    out = []
    for dq, bq, bare in found:
        if dq or bq:
            out.append(((dq or bq).replace('""', '"'), True))
        elif bare:
            out.append((bare, False))
    return tuple(out)


def _candidate(last: str, quoted: bool) -> bool:
    return "*" in last or bool(re.search(r"\d-\d+$", last))


def family_refs(sql: str, dialect: str = "") -> list[FamilyRef]:
    """Table references that may name a family, in text order; strings and comments read as the
    dialect's tokenizer reads them (sqlglot's dialect name; "" for its default)."""
    if not _MAYBE.search(sql):  # most SQL (count(*), t.*) has no name ending in '*' nor a digit range
        return []
    masked = mask(sql, dialect)
    out: list[FamilyRef] = []
    from_commas: set[int] | None = None
    for m in _REF.finditer(masked):
        name = m.group("name")
        parts = _parts(name)
        if not parts or not _candidate(*parts[-1]):
            continue
        if not parts[-1][1] and parts[-1][0].strip("*") == "":
            continue  # a bare '*' (SELECT a, * …)
        in_from = not m.group("lead").startswith(",")
        if not in_from:
            from_commas = _from_list_commas(masked) if from_commas is None else from_commas
            if m.start() not in from_commas:
                continue  # a comma of a select list or a call: `a, b*c` is arithmetic
        start, end = m.start("name"), m.end("name")
        alias = _ALIAS.match(masked, end)
        has_alias = alias is not None and (
            alias.group(1) is not None or alias.group(2).strip('"').lower() not in _NOT_ALIAS
        )
        out.append(
            FamilyRef(
                start=start,
                end=end,
                text=sql[start:end],
                parts=parts,
                has_alias=has_alias,
                in_from=in_from,
            )
        )
    return out


_CLAUSE = {"select", "from", "where", "group", "order", "having", "on", "join", "qualify", "limit", "window"}


def _from_list_commas(masked: str) -> set[int]:
    """Positions of the commas that separate items of a FROM list: the nearest clause keyword before
    each, at its own parenthesis depth, is FROM. One pass (a statement may hold thousands of commas)."""
    out: set[int] = set()
    clause: list[str | None] = [None]  # per open parenthesis: the last clause keyword inside it
    for m in re.finditer(r"[(),]|[A-Za-z_]+", masked):
        tok = m.group()
        if tok == "(":
            clause.append(None)
        elif tok == ")":
            if len(clause) > 1:
                clause.pop()
        elif tok == ",":
            if clause[-1] == "from":
                out.add(m.start())
        elif tok.lower() in _CLAUSE:
            clause[-1] = tok.lower()
    return out


def replace_refs(sql: str, refs: list[FamilyRef], replacements: list[str]) -> str:
    """`sql` with each reference's span replaced by its replacement."""
    out, pos = [], 0
    for ref, text in sorted(zip(refs, replacements, strict=True), key=lambda x: x[0].start):
        out.append(sql[pos : ref.start])
        out.append(text)
        pos = ref.end
    out.append(sql[pos:])
    return "".join(out)


__all__ = ["FamilyRef", "family_refs", "mask", "replace_refs"]
