"""run_python's sandbox: the supervisor and the worker (which imports nothing of flexsql)."""
