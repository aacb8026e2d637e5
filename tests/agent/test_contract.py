"""The model-facing contract: each stage's JSON schema, and the lenient parser for endpoints without
guided decoding (a table of replies → the object, or an error the model can act on)."""

from __future__ import annotations

import pytest

from flexsql.agent.contract import STAGES, StageOutputError, output_schema, parse_output

PARSED = [
    (
        "classify",
        '{"type": "answerable", "clarifying_question": null, "reason": null, "reply": null}',
        {"type": "answerable"},
    ),
    (
        "classify",
        'Sure.\n```json\n{"type": "improper", "reply": "Hi!"}\n```',
        {"type": "improper", "reply": "Hi!"},
    ),
    (
        "classify",
        "Looked at it.\nSTATUS: unanswerable — no column holds age",
        {"type": "unanswerable", "reason": "no column holds age"},
    ),
    ("classify", "STATUS: needs_clarification — by order date or ship date?", {"type": "ambiguous"}),
    (
        "link",
        'The tables are {"tables": ["orders", "customers"], "notes": "join on customer_id"} as shown.',
        {"tables": ["orders", "customers"]},
    ),
    ("knowledge", '{"summary": "net = gross - refunds"}', {"summary": "net = gross - refunds"}),
    (
        "plan",
        '{"plans": [{"reading": "a", "text": "count", "tables": ["t"]}]}',
        {"plans": [{"reading": "a", "text": "count", "tables": ["t"]}]},
    ),
    (
        "plan",
        '[{"reading": "a", "text": "count"}]',
        {"plans": [{"reading": "a", "text": "count", "tables": []}]},
    ),
    ("implement", '{"language": "sql", "code": "SELECT 1"}', {"language": "sql", "code": "SELECT 1"}),
    (
        "implement",
        'I will use SQL.\n```sql\nSELECT {"a": 1}\n```\nresult_id: r3',
        {"language": "sql", "code": 'SELECT {"a": 1}'},
    ),
    ("repair", "```python\ndf.head()\n```", {"language": "python", "code": "df.head()"}),
    ("implement", '{"language": "sql", "code": "SELECT \'}\' AS brace"}', {"code": "SELECT '}' AS brace"}),
    ("evaluate", '{"verdict": "plan", "feedback": "wrong date column"}', {"verdict": "plan"}),
    (
        "evaluate",
        "checks…\nVERDICT: implementation_issue — the join fans out",
        {"verdict": "implementation", "feedback": "the join fans out"},
    ),
    ("revise_plan", '{"reading": "b", "text": "use shipped_at", "tables": ["orders"]}', {"reading": "b"}),
]

REFUSED = [
    ("classify", "", "empty"),
    ("classify", '{"type": "maybe"}', "does not match"),
    ("link", "no JSON here", "no JSON object"),
    ("plan", '{"plans": []}', "empty"),
    ("implement", '{"language": "sql", "code": ""}', "empty"),
    ("implement", '{"language": "sql", "code": "SELECT 1"', "no JSON object"),  # broken JSON
    ("evaluate", '{"verdict": "ok"', "no JSON object"),
    ("revise_plan", '{"reading": "b"}', "does not match"),  # required field missing
]


@pytest.mark.parametrize(("stage", "reply", "expected"), PARSED)
def test_replies_are_parsed_leniently(stage: str, reply: str, expected: dict) -> None:
    parsed = parse_output(stage, reply).model_dump(exclude_none=True)  # optional fields left out stay out
    for key, value in expected.items():
        assert parsed[key] == value, (stage, reply, parsed)


@pytest.mark.parametrize(("stage", "reply", "problem"), REFUSED)
def test_unusable_replies_say_what_to_fix(stage: str, reply: str, problem: str) -> None:
    with pytest.raises(StageOutputError, match=problem):
        parse_output(stage, reply)


def test_every_stage_has_a_schema_and_the_config_knows_it() -> None:
    for stage in STAGES:
        schema = output_schema(stage)
        assert schema["type"] == "object" and schema["required"]
    plans = output_schema("plan", plans=6)["properties"]["plans"]
    assert plans["minItems"] == plans["maxItems"] == 6
    with pytest.raises(ValueError):
        output_schema("nosuch")
