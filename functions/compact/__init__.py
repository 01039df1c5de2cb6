"""The tasks function: compaction, retention, continuous queries and imports, one task per invocation.

The folder keeps the project's layout (``functions/compact``); the function, its construct
(``infra/compact.py``) and its logger are named ``tasks`` for what it runs (docs/architecture.md).
"""
