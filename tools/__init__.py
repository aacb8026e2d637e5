"""The FlexSQL tools: plain functions over a Source returning pydantic models (no MCP types)."""
