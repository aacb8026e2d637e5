"""Nested values print as one compact line, the keys that matter first (tools/runtime/compact_json.py)."""

from __future__ import annotations

from flexsql.tools.runtime.render import cell_text


def test_json_prints_compactly_with_the_keys_that_matter_first():
    pretty = '{\n  "adContent": null,\n  "adwordsClickInfo": {"page": 1},\n  "campaign": "(not set)",\n  "source": "(direct)"\n}'
    text = cell_text(pretty, 100)
    assert "\\n" not in text
    assert text.startswith('{"campaign":"(not set)","source":"(direct)"')
    assert text.endswith('"adContent":null}')  # NULL-valued keys last
    assert cell_text({"b": None, "a": [1, 2]}, 200) == '{"a":[1,2],"b":null}'
    assert cell_text("[not json", 200) == "[not json"
