"""compare_results: group result handles into equivalence classes and say how the others differ.
The equivalence itself lives in flexsql.tools.sql.equivalence (shared with the strict scorer)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from flexsql.errors import InvalidArgument
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.runtime.schema import unlisted
from flexsql.tools.sql.equivalence import compare_tables


class PairDifference(BaseModel):
    left: str
    right: str
    equivalent: bool
    reason: str


class Comparison(ToolResult):
    equivalent: bool  # all results equivalent
    groups: list[list[str]]  # equivalence classes, largest first
    differences: list[PairDifference]

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        if self.equivalent:
            return f"equivalent: {', '.join(self.groups[0])} return the same result"
        lines = ["not equivalent; groups: " + " | ".join(", ".join(g) for g in self.groups)]
        lines += [f"- {d.left} vs {d.right}: {d.reason}" for d in self.differences if not d.equivalent]
        return "\n".join(lines)


class CompareResults(ToolArgs):
    # the description states 2-10
    result_ids: list[str] = Field(
        min_length=2, max_length=10, json_schema_extra=unlisted("minItems", "maxItems")
    )


@tool(
    "Whether 2-10 results are equivalent (row order ignored unless ordered, columns matched by content) "
    "and how they differ."
)
def compare_results(ctx: ToolContext, args: CompareResults) -> Comparison:
    result_ids = args.result_ids
    ids = list(dict.fromkeys(r.strip() for r in result_ids))
    stored = {rid: ctx.results.get(rid) for rid in ids}
    for rid, result in stored.items():
        if result.truncated:
            raise InvalidArgument(
                f"{rid} keeps only {len(result.rows)} of {result.total_rows}+ rows, so it cannot be "
                "compared in full; narrow the query (aggregate or filter) and compare again"
            )
        if result.cells_cut:
            raise InvalidArgument(
                f"{rid} has {result.cells_cut} value(s) kept only in part (over the store's cell "
                "cap), so it cannot be compared in full; compare their md5() or length() instead"
            )
    groups: list[list[str]] = []
    differences: list[PairDifference] = []
    for rid in ids:
        placed = False
        for group in groups:
            head = stored[group[0]]
            cur = stored[rid]
            verdict = compare_tables(
                head.columns, head.rows, cur.columns, cur.rows, ordered=head.ordered and cur.ordered
            )
            differences.append(
                PairDifference(left=group[0], right=rid, equivalent=verdict.equivalent, reason=verdict.reason)
            )
            if verdict.equivalent:
                group.append(rid)
                placed = True
                break
        if not placed:
            groups.append([rid])
    groups.sort(key=len, reverse=True)
    return Comparison(equivalent=len(groups) == 1, groups=groups, differences=differences)
