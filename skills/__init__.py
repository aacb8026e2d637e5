"""flexsql.skills."""
