"""flexsql: FlexSQL-style database access for LLM agents (MCP server, agent, evaluation harness)."""

__version__ = "0.1.0"
