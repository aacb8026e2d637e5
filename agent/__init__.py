"""flexsql.agent."""
