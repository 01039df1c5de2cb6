"""Continuous queries: definitions, the runs of their windows, and the retention they imply."""
