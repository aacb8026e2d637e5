"""What every tool runs with: the context, the result store, the registry, text rendering."""
