"""The backends' drivers (labqueue.core.Driver), side by side: sqlite/ and postgres/, each
with its driver and its schema's checks and migrations (and postgres/ its SQL)."""
