"""The agent's stages: one function each, typed input → typed output (agent/contract.py)."""
