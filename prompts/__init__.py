"""flexsql.prompts."""
