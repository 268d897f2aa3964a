"""The backends' drivers (labqueue.core.Driver): SQLite here; PostgreSQL in labqueue.postgres.driver."""
