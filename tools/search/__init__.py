"""search_schema: words, the index, ranking rules, families, keys, synonyms."""
