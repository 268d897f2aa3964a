"""The backends' drivers (labqueue.core.Driver), side by side: sqlite/ and postgres/, each
with its driver, its SQL (sql.py) and its schema's checks and migrations."""
