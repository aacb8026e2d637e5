"""A source's knowledge: verified queries, documents and facts learned from queries (store.py), imported
by `flexsql learn` (learn.py), recalled for a question (recall.py), offered as the recall and remember
tools (tools.py)."""
