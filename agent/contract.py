"""The model-facing contract (docs/contract.md): stage names, each stage's JSON output as a
pydantic model and a JSON schema, and the lenient parser for endpoints without guided decoding.

Users serve stages with their own models and guided decoding against exactly these shapes, and the
benchmarks script models against them: extend only compatibly (new optional fields).
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ValidationError

from flexsql.config import STAGES
from flexsql.tools.sql.fences import fenced_blocks


def _lenient_strings(value: Any) -> Any:
    """An optional list of short texts as a model may send it: one string, a list of anything."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [v if isinstance(v, str) else json.dumps(v, default=str) for v in value if v is not None]
    return [json.dumps(value, default=str)]


# Optional extension (issue 18): what a stage learnt that later stages should not look up again —
# stored spellings of values, verified join keys, checks with their result ids and numbers. Parsed
# leniently (a string, or a list of anything); the run notebook carries them to every later stage.
Findings = Annotated[list[str], BeforeValidator(_lenient_strings)]


class Classification(BaseModel):
    type: Literal["answerable", "ambiguous", "unanswerable", "improper"]
    clarifying_question: str | None = None
    reason: str | None = None
    reply: str | None = None
    # the turn restated to stand alone (earlier turns' references resolved); carried with the history
    standalone: str | None = None
    readings: Annotated[list[str], BeforeValidator(_lenient_strings)] = []  # the readings the question allows
    findings: Findings = []


def _text_or_empty(value: Any) -> Any:
    """An optional text a model may send as null."""
    return "" if value is None else value


OptionalText = Annotated[str, BeforeValidator(_text_or_empty)]


class Linking(BaseModel):
    tables: list[str]
    notes: OptionalText = ""
    findings: Findings = []


class Knowledge(BaseModel):
    summary: str


def _lenient_rank(value: Any) -> Any:
    """A rank as a model may send it ("1", 1.0, "first"…); anything unreadable is no rank."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value) if value >= 1 else None
    if isinstance(value, str):
        digits = re.search(r"\d+", value)
        return int(digits.group(0)) if digits and int(digits.group(0)) >= 1 else None
    return None


class Plan(BaseModel):
    reading: str
    text: str
    tables: list[str] = []
    # 1 = the most likely reading of the question, 2 the next…; plans of one reading share its rank
    rank: Annotated[int | None, BeforeValidator(_lenient_rank)] = None


class Plans(BaseModel):
    plans: list[Plan]
    intent: str = ""  # the question restated: what, who, where, when, how measured
    readings: Annotated[list[str], BeforeValidator(_lenient_strings)] = []  # most likely first
    findings: Findings = []


class Program(BaseModel):
    language: Literal["sql", "python"]
    code: str
    findings: Findings = []


# `alternative`: the program is right for its plan's reading, but the question more likely means
# another reading (the candidate stays, answering "if you meant …"; selection prefers the likelier).
VerdictWord = Literal["ok", "alternative", "plan", "implementation"]


class Verdict(BaseModel):
    verdict: VerdictWord
    feedback: OptionalText = ""
    findings: Findings = []


OUTPUTS: dict[str, type[BaseModel]] = {
    "classify": Classification,
    "link": Linking,
    "knowledge": Knowledge,
    "plan": Plans,
    "implement": Program,
    "repair": Program,
    "evaluate": Verdict,
    "revise_plan": Plan,
}

_NULLABLE_STR = {"type": ["string", "null"]}
_STR_LIST = {"type": "array", "items": {"type": "string"}}
_PLAN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["reading", "text"],
    "properties": {
        "reading": {"type": "string"},
        "text": {"type": "string"},
        "tables": _STR_LIST,
        "rank": {"type": ["integer", "null"], "minimum": 1},
    },
}


def output_schema(stage: str, plans: int = 4) -> dict[str, Any]:
    """The JSON schema sent as `response_format` for `stage` (hand-written: exactly the contract)."""
    if stage == "classify":
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["type"],
            "properties": {
                "type": {"enum": ["answerable", "ambiguous", "unanswerable", "improper"]},
                "standalone": _NULLABLE_STR,
                "readings": _STR_LIST,
                "clarifying_question": _NULLABLE_STR,
                "reason": _NULLABLE_STR,
                "reply": _NULLABLE_STR,
                "findings": _STR_LIST,
            },
        }
    if stage == "link":
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["tables"],
            "properties": {"tables": _STR_LIST, "notes": _NULLABLE_STR, "findings": _STR_LIST},
        }
    if stage == "knowledge":
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["summary"],
            "properties": {"summary": {"type": "string"}},
        }
    if stage == "plan":
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["plans"],
            "properties": {
                "intent": {"type": "string"},
                "readings": _STR_LIST,
                "plans": {"type": "array", "items": _PLAN, "minItems": plans, "maxItems": plans},
                "findings": _STR_LIST,
            },
        }
    if stage in ("implement", "repair"):
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["language", "code"],
            "properties": {
                "language": {"enum": ["sql", "python"]},
                "code": {"type": "string"},
                "findings": _STR_LIST,
            },
        }
    if stage == "evaluate":
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["verdict"],
            "properties": {
                "verdict": {"enum": ["ok", "alternative", "plan", "implementation"]},
                "feedback": {"type": "string"},
                "findings": _STR_LIST,
            },
        }
    if stage == "revise_plan":
        return _PLAN
    raise ValueError(f"unknown stage {stage!r}; the stages are {', '.join(STAGES)}")


class StageOutputError(ValueError):
    """A reply that is not the stage's JSON object; the message is sent back to the model."""


_VERDICT_LINE = re.compile(r"VERDICT:\s*(correct|implementation_issue|plan_issue)\b(.*)$", re.MULTILINE)
_STATUS_LINE = re.compile(r"STATUS:\s*(answerable|needs_clarification|unanswerable)\b(.*)$", re.MULTILINE)
# what the words of those lines mean in the stages' JSON
_VERDICT_WORDS: dict[str, Literal["ok", "plan", "implementation"]] = {
    "correct": "ok",
    "implementation_issue": "implementation",
    "plan_issue": "plan",
}
_STATUS_WORDS: dict[str, Literal["answerable", "ambiguous", "unanswerable"]] = {
    "answerable": "answerable",
    "needs_clarification": "ambiguous",
    "unanswerable": "unanswerable",
}


# Bounds of the lenient parser: a reply is the model's, and the model may be hostile. Only the end of
# a long reply is read (the answer comes last), and only a few of its objects are tried.
PARSE_CHARS = 200_000  # characters of a reply the parser reads: its last ones
MAX_SPANS = 32  # balanced {...} spans tried: the first and the last half of them
MAX_FENCES = 8  # ```json blocks tried
MAX_DEPTH = 64  # nesting of a JSON value the parser accepts (a stage's object needs 4)


def _json_candidates(text: str) -> list[str]:
    """The reply itself, its first fenced blocks, then balanced {...} spans (the first and the last
    MAX_SPANS // 2, in order)."""
    found = [text.strip()]
    found += [b.body.strip() for b in fenced_blocks(text) if b.lang in ("", "json")][:MAX_FENCES]
    half = MAX_SPANS // 2
    first: list[tuple[int, int]] = []
    last: deque[tuple[int, int]] = deque(maxlen=half)
    depth, start, in_str, escape = 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0 and start >= 0:
                (first if len(first) < half else last).append((start, i + 1))
    found += [text[a:b] for a, b in [*first, *last]]
    return found


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` (parsed JSON) nests lists and objects more than `limit` levels deep."""
    level: list[Any] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def load_json(text: str, limit: int = MAX_DEPTH) -> Any:
    """json.loads, with nesting past `limit` (and past Python's own recursion limit) a ValueError."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"the JSON is nested more than {limit} levels deep") from None
    if too_deep(value, limit):
        raise ValueError(f"the JSON is nested more than {limit} levels deep")
    return value


def _program_from_fence(text: str) -> dict[str, Any] | None:
    """An implement/repair reply in the prompts' own format: one ```sql or ```python block."""
    for block in fenced_blocks(text):
        if block.lang in ("sql", "python", "py"):
            return {
                "language": "python" if block.lang.startswith("py") else "sql",
                "code": block.body.strip(),
            }
    return None


def parse_output(stage: str, text: str | None, plans: int = 4) -> BaseModel:
    """The stage's object from a reply: strict JSON, a ```json fence, or an object inside text.
    Raises StageOutputError with a message the model can act on."""
    model = OUTPUTS[stage]
    if not text or not text.strip():
        raise StageOutputError("the reply was empty: answer with the JSON object")
    whole = len(text)
    if whole > PARSE_CHARS:
        text = text[-PARSE_CHARS:]
    problems: list[str] = []
    candidates: list[Any] = []
    for chunk in _json_candidates(text):
        try:
            candidates.append(load_json(chunk))
        except json.JSONDecodeError:
            continue
        except ValueError as exc:  # nested too deep
            problems.append(str(exc))
    if stage in ("implement", "repair"):
        fenced = _program_from_fence(text)
        if fenced:
            candidates.append(fenced)
    for data in candidates:
        if stage == "plan" and isinstance(data, list):
            data = {"plans": data}
        if not isinstance(data, dict):
            continue
        try:
            parsed = model.model_validate(data)
        except ValidationError as exc:
            problems.append(
                "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'object'}: {e['msg']}" for e in exc.errors()[:5]
                )
            )
            continue
        if isinstance(parsed, Plans) and not parsed.plans:
            problems.append("plans: the list is empty")
            continue
        if isinstance(parsed, Program) and not parsed.code.strip():
            problems.append("code: empty")
            continue
        return parsed
    if stage == "classify":
        status = _STATUS_LINE.search(text)  # the clarify prompt's own format: `STATUS: unanswerable — …`
        if status:
            kind, detail = status.group(1), status.group(2).strip(" —-:") or None
            return Classification(
                type=_STATUS_WORDS[kind],
                clarifying_question=detail if kind == "needs_clarification" else None,
                reason=detail if kind == "unanswerable" else None,
            )
    if stage == "evaluate":
        verdict = _VERDICT_LINE.search(text)  # the verify prompt's own format: `VERDICT: plan_issue — …`
        if verdict:
            return Verdict(
                verdict=_VERDICT_WORDS[verdict.group(1)],
                feedback=verdict.group(2).strip(" —-:") or text.strip()[-500:],
            )
    if whole > PARSE_CHARS:
        raise StageOutputError(
            f"the reply was {whole:,} characters long and its last {PARSE_CHARS:,} hold no usable "
            "JSON object; answer with the JSON object only, nothing else"
        )
    if problems:
        raise StageOutputError(
            f"the JSON object does not match the schema ({problems[-1]}); "
            "answer again with the corrected object only"
        )
    raise StageOutputError("no JSON object found in the reply; answer with the JSON object only")
