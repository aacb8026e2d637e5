"""Compact JSON schemas: what a model needs of a pydantic schema and nothing else (a client pays for
the tool list on every turn)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def compact_schema(schema: dict[str, Any], nullable: bool = False) -> dict[str, Any]:
    """A JSON schema without what a model does not need: titles, null defaults, `anyOf: [T, null]`
    wrappers — dropped for arguments (null means "not given"), `"type": [T, "null"]` for results
    (`nullable`), where a null really is sent. `$defs` are kept (nested result models), also compacted."""

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(n) for n in node]
        return clean_object(node) if isinstance(node, dict) else node

    def clean_object(node: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "default" and value is None:
                continue
            out[key] = clean(value) if key != "properties" else {k: clean(v) for k, v in value.items()}
        variants = out.get("anyOf")
        if isinstance(variants, list):
            kept = [v for v in variants if v != {"type": "null"}]
            if len(kept) == 1 and len(kept) < len(variants):
                out.pop("anyOf")
                only = dict(kept[0])
                if nullable:
                    if isinstance(only.get("type"), str):
                        only["type"] = [only["type"], "null"]
                    else:  # a $ref or a composite: keep the null alternative explicit
                        only = {"anyOf": [only, {"type": "null"}]}
                out = {**only, **out}
        return out

    return clean_object(schema)


def unlisted(*keys: str) -> Callable[[dict[str, Any]], None]:
    """`json_schema_extra` for a bound that is validated but not shown to the model: a sanity cap
    no sensible call reaches (a 200,000-character program) costs tokens on every turn."""

    def drop(schema: dict[str, Any]) -> None:
        for key in keys:
            schema.pop(key, None)

    return drop
