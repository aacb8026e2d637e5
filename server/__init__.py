"""flexsql.server."""
