"""Values: the persistent value index, find_values, distinct_values, profile_column."""
