"""flexsql.evals."""
