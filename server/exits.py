"""The exit codes every `flexsql` command uses (docs/cli.md): 0 success; 1 a runtime error (a query, the
model endpoint, an unreachable source); 2 a usage or configuration error (a flag, a setting, a missing
file), whenever it is found; 130 interrupted (Ctrl-C, or SIGTERM for `flexsql eval`). A module of its
own, importing nothing, so the process entry can use them before anything else is imported."""

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
