"""The SQLite driver (labqueue.core.Driver): driver.py the connection and its statements,
schema.py the file's checks and its schema's migrations; the SQL is labqueue/sql.py's."""

# Notebook 14 reads the driver here (from labqueue.drivers.sqlite import SqliteDriver);
# labqueue's own modules import it from .driver.
from .driver import SqliteDriver

__all__ = ["SqliteDriver"]
