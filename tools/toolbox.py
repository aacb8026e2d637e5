"""The tools flexsql offers, in the order a client lists them. A tool is declared once, beside its
function (`@tool` in its module); this list only says which modules hold tools. The agent's `ask`
sits above this layer: the server adds it (flexsql.server.app)."""

from __future__ import annotations

from flexsql.tools import catalog, compare, joins, python_tool, query, select, validate
from flexsql.tools.knowledge import tools as knowledge
from flexsql.tools.runtime.registry import Tools
from flexsql.tools.search import ranking
from flexsql.tools.values import distinct, find, profile

TOOLS = Tools.from_modules(
    catalog, joins, query, validate, ranking, find, distinct, profile, compare, python_tool, select, knowledge
)
