"""Execution-grounded selection: which of several candidate programs answers the question.

Candidates are grouped by result equivalence — the equivalence `compare_results` uses
(`flexsql.tools.sql.equivalence.compare_tables`, ordered only when both results are), closed
transitively with union-find — and each group is scored by what its results and its evaluator
verdicts show. The best group's simplest member is chosen; every group stays in the answer with
its score, signals and reasons. No model is involved and the result is deterministic.

The score of a group is a sum of weighted signals (the weights are the constants below):

    W_SUPPORT * support          members that are independent evidence (a repair that reproduces
                                 the result of the program it repaired is not a second vote)
  + W_OK * ok - W_BAD * bad      the evaluator's verdicts on the members (FlexSQL ignores them)
  - W_EMPTY   if no rows
  - W_NULL    if some column is all NULL (an outer join or an aggregate over nothing)
  - W_ZERO    if some column is all zero (a count or sum over nothing)
  + W_SHAPE * shape              +1 when the row count is the one the question asks for ("how
                                 many" is one row, "top 5" five, "each"/"per" several), -1 when
                                 it is not, 0 when the question says nothing about it
  + W_MIXED   if SQL and Python members agree (two languages rarely make the same mistake)
  - W_ALTERNATIVE * alternative  verdicts "right for its reading, but the question more likely
                                 means another" (neither for nor against the result)
  + W_READING * reading          +1 when a member's plan reads the question the most likely way
                                 (rank 1), -1 when every ranked member reads it a less likely way,
                                 0 when the plans carry no rank

Results agree when compare_results finds them equivalent, or when one has every column of the
other with the same rows and adds columns (Spider 2.0's scorer accepts extra predicted columns, so
"5 columns vs 3" is agreement on what was asked). The group's answer is then its widest member.

Why these weights — `benchmarks/selection.py`: 400 Spider train questions, each a pool of the
gold SQL, rewrites returning the same result and sqlglot mutants returning a different one; a
simulated model right with p=0.4 (else a mutant, or an execution error one time in five) and an
evaluator right with q=0.8. Coordinate descent on the first 200 questions (objective: the mean
accuracy of K=4/8 with and without repair; a change kept only when it gains more than 0.002)
returns these weights; on the other 200 (benchmarks/results/selection.json) selection scores
0.755 / 0.899 (K=4 / 8, no repair) against 0.534 / 0.589 for FlexSQL's majority vote, and with
repair (r=0.3) 0.890 / 0.971 against an oracle best-of-K of 0.983 / 1.000.

- W_BAD = 2 x W_OK: a rejected member should count against its group, not merely not for it
  (repairs keep a rejected program as a candidate, so rejected wrong programs are common). The
  tune objective rises from 0.72 (W_BAD = 0) to 0.888 at 2 and falls again at 3.
- W_OK = W_SUPPORT: the objective is flat for W_OK in 0.5-1.5 (0.8875-0.8891); 1 keeps the rule
  "a verdict breaks a tie between equal-size groups, an extra agreeing member outweighs an ok".
- W_EMPTY = 1.5: flat from 0.5 to 2 (gold is rarely empty, and the evaluator already rejects most
  empty mutants), falling beyond 2.5; 1.5 is the largest value on the plateau, so a non-empty
  singleton beats two agreeing empty results.
- W_NULL, W_ZERO, W_SHAPE: flat within 0.001 over their whole grids in these pools (mutants rarely
  null a column, and a changed LIMIT is usually rejected by the evaluator too), so they keep
  prior values: ReFoRCE's "null or zero results tend to be wrong" — an all-NULL column (1.5) is
  as good as empty, an all-zero one (0.5) can be a real count — and half a vote for the shape,
  since the question regexes misread some questions.
- W_MIXED = 0.5 is not measured (the pools are SQL only): half a vote, after DPC's finding that
  an independent pandas solution is a good cross-check of SQL.
- W_ALTERNATIVE, W_READING = 0.5 are not measured (the pools carry no readings): half a vote, so a
  likelier reading breaks a tie between equally supported groups but does not outvote agreement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, Field

from flexsql.errors import InvalidArgument
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.runtime.results import StoredResult
from flexsql.tools.sql.equivalence import compare_tables, normalize_value

W_SUPPORT = 1.0
W_OK = 1.0
W_BAD = 2.0
W_EMPTY = 1.5
W_NULL = 1.5
W_ZERO = 0.5
W_SHAPE = 0.5
W_MIXED = 0.5
W_ALTERNATIVE = 0.5
W_READING = 0.5

MAX_RESULT_IDS = 20

Verdict = Literal["ok", "alternative", "plan", "implementation"]


class CandidateIn(BaseModel):
    """One candidate program and what became of it."""

    candidate_id: str
    result_id: str | None = None
    language: Literal["sql", "python"] = "sql"
    code: str = ""
    error: str | None = None  # execution failed -> no result
    verdicts: list[Verdict] = []  # the evaluator's verdicts on this candidate
    plan_index: int | None = None
    repaired_from: str | None = None
    reading_rank: int | None = None  # its plan's reading: 1 = the most likely one


class GroupScore(BaseModel):
    members: list[str]  # candidate ids, the chosen (simplest) one first
    result_id: str | None  # the simplest member's result; None for candidates that did not run
    score: float
    signals: dict[str, float | int | bool | str]
    reasons: list[str]


class Selection(ToolResult):
    chosen: str | None  # candidate_id (result_id for the select_result tool)
    chosen_result_id: str | None
    groups: list[GroupScore] = Field(default_factory=list)  # best first; candidates that did not run last
    reason: str

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        if self.chosen is None:
            head = f"no candidate chosen: {self.reason}"
        else:
            head = f"chosen: {self.chosen} (result {self.chosen_result_id}) — {self.reason}"
        lines = [head]
        for i, g in enumerate(self.groups, 1):
            shown = {k: v for k, v in g.signals.items() if k not in ("ran",)}
            sig = ", ".join(f"{k}={_fmt(v)}" for k, v in shown.items())
            members = ", ".join(g.members)
            if g.result_id is None:
                lines.append(f"{i}. [{members}] did not run: {'; '.join(g.reasons)}")
            else:
                lines.append(
                    f"{i}. [{members}] score {g.score:+.2f} ({sig})"
                    + (f": {'; '.join(g.reasons)}" if g.reasons else "")
                )
        return "\n".join(lines)


def _fmt(v: float | int | bool | str) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# -- the shape a question asks for ----------------------------------------------------------------

_NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
}
_NUM = r"(\d{1,3}|" + "|".join(_NUMBERS) + r")"
_SUPERLATIVE = (
    r"(most|least|highest|lowest|largest|smallest|biggest|best|worst|oldest|youngest|newest|"
    r"latest|earliest|longest|shortest|cheapest|fewest|greatest|top|bottom|\w+est)"
)
_TOP_N = [
    re.compile(rf"\b(?:top|first|last|bottom)\s+{_NUM}\b", re.I),
    re.compile(rf"\b{_NUM}\s+(?:\w+\s+)?{_SUPERLATIVE}\b", re.I),
]
_SEVERAL = re.compile(r"\b(each|per|every|for all|by (?:each|every))\b", re.I)
_ONE = [
    re.compile(r"^\s*(how many|how much|count)\b", re.I),
    re.compile(
        r"\b(what|which) (?:is|was|are) the (?:total|average|mean|sum|maximum|minimum|max|min|"
        r"number|count|median)\b",
        re.I,
    ),
    re.compile(
        r"\b(?:find|give|show|tell me|return|compute) (?:me )?the (?:total|average|mean|sum|"
        r"maximum|minimum|number|count)\b",
        re.I,
    ),
    re.compile(r"\bhow many\b", re.I),
]


class Shape(BaseModel):
    kind: Literal["rows", "one", "several"]
    rows: int | None = None
    why: str

    def check(self, n: int) -> int:
        """+1 when `n` rows fit, -1 when they do not."""
        if self.kind == "rows":
            return 1 if n == self.rows else -1
        if self.kind == "one":
            return 1 if n == 1 else -1
        return 1 if n >= 2 else -1


def expected_shape(question: str | None) -> Shape | None:
    """The row count the question asks for, from cheap patterns; None when it does not say."""
    if not question:
        return None
    for pattern in _TOP_N:
        m = pattern.search(question)
        if m:
            word = m.group(1).lower()
            n = int(word) if word.isdigit() else _NUMBERS[word]
            if n >= 1:
                return Shape(kind="rows", rows=n, why=f"{m.group(0)!r} asks for {n} row(s)")
    m = _SEVERAL.search(question)
    if m:
        return Shape(kind="several", why=f"{m.group(0)!r} asks for several rows")
    for pattern in _ONE:
        m = pattern.search(question)
        if m:
            return Shape(kind="one", why=f"{m.group(0)!r} asks for one row")
    return None


# -- grouping ---------------------------------------------------------------------------------------


def results_equivalent(a: StoredResult, b: StoredResult) -> bool:
    """The compare_results equivalence; a truncated result only matches one truncated the same way
    (the kept rows are a prefix, so equal prefixes are the best evidence there is)."""
    if a.result_id == b.result_id:
        return True
    if a.truncated or b.truncated:
        if not (a.truncated and b.truncated and a.total_rows == b.total_rows and len(a.rows) == len(b.rows)):
            return False
    verdict = compare_tables(a.columns, a.rows, b.columns, b.rows, ordered=a.ordered and b.ordered)
    return verdict.equivalent


def results_agree(a: StoredResult, b: StoredResult) -> bool:
    """Equivalent, or the wider result holds every column of the narrower one with the same rows
    (extra columns are not disagreement: Spider 2.0 accepts extra predicted columns)."""
    if results_equivalent(a, b):
        return True
    if len(a.columns) == len(b.columns):
        return False
    narrow, wide = (a, b) if len(a.columns) < len(b.columns) else (b, a)
    if narrow.truncated or wide.truncated:
        if not (narrow.truncated and wide.truncated and narrow.total_rows == wide.total_rows):
            return False
        if len(narrow.rows) != len(wide.rows):
            return False
    verdict = compare_tables(
        narrow.columns,
        narrow.rows,
        wide.columns,
        wide.rows,
        ordered=narrow.ordered and wide.ordered,
        allow_extra_columns=True,
    )
    return verdict.equivalent


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            self.parent[max(ri, rj)] = min(ri, rj)


def _normalised_code(code: str) -> str:
    code = re.sub(r"--[^\n]*|#[^\n]*|/\*.*?\*/", " ", code, flags=re.S)
    return " ".join(code.split()).rstrip(";").strip().lower()


def _simplicity_key(c: CandidateIn, position: int) -> tuple[int, int, int, int]:
    code = _normalised_code(c.code)
    # a member whose code we do not know is not "simpler" for it
    return (0 if code else 1, len(code), 0 if c.language == "sql" else 1, position)


# -- scoring ----------------------------------------------------------------------------------------


class GroupFeatures(BaseModel):
    """What the score of a group is computed from (also what the benchmark tunes the weights on)."""

    size: int
    support: int
    ok: int
    bad: int
    rows: int
    empty: bool
    null_column: bool
    zero_column: bool
    shape: int  # +1 fits the question, -1 does not, 0 unknown
    mixed: bool
    alternative: int = 0  # "right for a less likely reading" verdicts
    reading: int = 0  # +1 a member reads the question the likeliest way, -1 none does, 0 unranked


def score_features(f: GroupFeatures, weights: dict[str, float] | None = None) -> float:
    w = _WEIGHTS if weights is None else {**_WEIGHTS, **weights}
    return (
        w["support"] * f.support
        + w["ok"] * f.ok
        - w["bad"] * f.bad
        - w["empty"] * f.empty
        - w["null"] * f.null_column
        - w["zero"] * f.zero_column
        + w["shape"] * f.shape
        + w["mixed"] * f.mixed
        - w["alternative"] * f.alternative
        + w["reading"] * f.reading
    )


_WEIGHTS = {
    "support": W_SUPPORT,
    "ok": W_OK,
    "bad": W_BAD,
    "empty": W_EMPTY,
    "null": W_NULL,
    "zero": W_ZERO,
    "shape": W_SHAPE,
    "mixed": W_MIXED,
    "alternative": W_ALTERNATIVE,
    "reading": W_READING,
}


def _column_flags(result: StoredResult) -> tuple[bool, bool]:
    if not result.rows or not result.columns:
        return False, False
    null_col = zero_col = False
    for j in range(len(result.columns)):
        values = [normalize_value(row[j]) for row in result.rows]
        if all(v is None for v in values):
            null_col = True
        # normalised numbers are ints, floats and (exact decimals) Fractions
        elif all(isinstance(v, int | float | Fraction) and v == 0 for v in values):
            zero_col = True
    return null_col, zero_col


def group_features(
    members: Sequence[CandidateIn], result: StoredResult, shape: Shape | None
) -> GroupFeatures:
    ids = {c.candidate_id for c in members}
    rows = result.total_rows if not result.total_is_lower_bound else max(result.total_rows, len(result.rows))
    null_col, zero_col = _column_flags(result)
    ranks = [c.reading_rank for c in members if c.reading_rank is not None]
    return GroupFeatures(
        size=len(members),
        support=sum(1 for c in members if c.repaired_from not in ids),
        ok=sum(c.verdicts.count("ok") for c in members),
        bad=sum(c.verdicts.count("plan") + c.verdicts.count("implementation") for c in members),
        rows=rows,
        empty=rows == 0,
        null_column=null_col,
        zero_column=zero_col,
        shape=0 if shape is None or rows == 0 else shape.check(rows),
        mixed=len({c.language for c in members}) > 1,
        alternative=sum(c.verdicts.count("alternative") for c in members),
        reading=0 if not ranks else (1 if min(ranks) == 1 else -1),
    )


def _reasons(f: GroupFeatures, shape: Shape | None) -> list[str]:
    out = []
    if f.size > 1:
        out.append(
            f"{f.size} candidates agree" + (f" ({f.support} independent)" if f.support < f.size else "")
        )
    if f.ok or f.bad:
        out.append(f"evaluator: {f.ok} ok, {f.bad} against")
    if f.empty:
        out.append("empty result")
    if f.null_column:
        out.append("a column is all NULL")
    if f.zero_column:
        out.append("a column is all zero")
    if shape is not None and f.shape:
        out.append(f"{f.rows} row(s) {'fit' if f.shape > 0 else 'do not fit'}: {shape.why}")
    if f.mixed:
        out.append("SQL and Python agree")
    if f.alternative:
        out.append(f"evaluator: {f.alternative} right only for a less likely reading")
    if f.reading:
        out.append("the most likely reading" if f.reading > 0 else "a less likely reading")
    return out


def select_candidates(
    ctx: ToolContext, candidates: list[CandidateIn], question: str | None = None
) -> Selection:
    """Group `candidates` by result, score the groups and choose (see the module docstring)."""
    if not candidates:
        return Selection(chosen=None, chosen_result_id=None, reason="no candidates were given")
    ids = [c.candidate_id for c in candidates]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidArgument(f"candidate_id {dup!r} appears twice: give each candidate its own id")
    ran: list[tuple[int, CandidateIn, StoredResult]] = []
    failed: list[GroupScore] = []
    for pos, c in enumerate(candidates):
        if c.error is not None or c.result_id is None:
            why = f"execution failed: {c.error}" if c.error is not None else "no result"
            failed.append(
                GroupScore(
                    members=[c.candidate_id],
                    result_id=None,
                    score=0.0,
                    signals={"ran": False},
                    reasons=[_short(why)],
                )
            )
            continue
        ran.append((pos, c, ctx.results.get(c.result_id)))
    if not ran:
        return Selection(
            chosen=None,
            chosen_result_id=None,
            groups=failed,
            reason=f"none of the {len(candidates)} candidate(s) ran, so there is no result to choose; "
            "repair the errors listed and select again",
        )

    uf = _UnionFind(len(ran))
    for i in range(len(ran)):
        for j in range(i):
            if uf.find(i) != uf.find(j) and results_agree(ran[j][2], ran[i][2]):
                uf.union(i, j)
    by_root: dict[int, list[int]] = {}
    for i in range(len(ran)):
        by_root.setdefault(uf.find(i), []).append(i)

    shape = expected_shape(question)
    scored: list[tuple[tuple[float, int, int], GroupScore]] = []
    for members_idx in by_root.values():
        # the widest member answers for the group (extra columns cost nothing, a missing one does)
        members_idx.sort(key=lambda i: (-len(ran[i][2].columns), *_simplicity_key(ran[i][1], ran[i][0])))
        head = ran[members_idx[0]]
        members = [ran[i][1] for i in members_idx]
        f = group_features(members, head[2], shape)
        score = round(score_features(f), 6)
        signals: dict[str, float | int | bool | str] = {"ran": True, **f.model_dump()}
        group = GroupScore(
            members=[c.candidate_id for c in members],
            result_id=head[2].result_id,
            score=score,
            signals=signals,
            reasons=_reasons(f, shape),
        )
        first_pos = min(ran[i][0] for i in members_idx)
        scored.append(((-score, -f.size, first_pos), group))
    scored.sort(key=lambda item: item[0])
    groups = [g for _, g in scored]
    best = groups[0]
    why = f"best of {len(groups)} group(s), score {best.score:+.2f}"
    if best.reasons:
        why += ": " + "; ".join(best.reasons)
    if len(best.members) > 1:
        why += "; simplest member"
    return Selection(
        chosen=best.members[0], chosen_result_id=best.result_id, groups=groups + failed, reason=why
    )


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SelectResult(ToolArgs):
    result_ids: list[str] = Field(min_length=1, max_length=MAX_RESULT_IDS, description="candidates")
    question: str | None = None


@tool("Pick the best candidate result for a question by execution evidence, and say why.")
def select_result(ctx: ToolContext, args: SelectResult) -> Selection:
    """Choose among stored results (from run_query or run_python)."""
    ids = list(dict.fromkeys(r.strip() for r in args.result_ids))
    question = args.question
    candidates = []
    for rid in ids:
        stored = ctx.results.get(rid)  # NotFoundError names the ids that are kept
        python = stored.origin == "python"
        candidates.append(
            CandidateIn(
                candidate_id=stored.result_id,
                result_id=stored.result_id,
                language="python" if python else "sql",
                code=stored.sql or "",
            )
        )
    return select_candidates(ctx, candidates, question)
