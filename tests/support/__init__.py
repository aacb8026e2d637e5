"""Helpers shared by the tests: the shop database on every engine (engines), the hostile-data databases
(hostile), MCP servers started the ways users start them (mcp_support), a scripted OpenAI-compatible
endpoint (openai_stub) and the agent's acceptance-test shop (agent_support).

    from tests.support.engines import make_duckdb
"""
