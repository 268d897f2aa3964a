"""The SQLite driver (labqueue.core.Driver): driver.py the connection and its statements,
sql.py every statement in SQLite's dialect, schema.py the file's checks and its schema's
migrations."""
