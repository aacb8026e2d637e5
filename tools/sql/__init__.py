"""The SQL layer: the read-only guard, conditions, ordering, result equivalence."""
