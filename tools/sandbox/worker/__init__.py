"""run_python's sandboxed side, launched by path as `python -I -S -B worker/__main__.py` (see __main__.py):
it imports nothing of flexsql, only the standard library (and pandas, numpy, pyarrow, duckdb in functions)."""
