"""The queue on PostgreSQL (psycopg 3): ``pip install labqueue[postgres]``.

``PgJobQueue`` has JobQueue's API and rules; ``labqueue.open_queue(url)`` picks it for a
``postgresql://`` URL; its driver, SQL and schema are labqueue.drivers.postgres.
``labqueue.postgres.server.throwaway_server()`` starts a disposable server for tests and
notebooks (``watchdog.py`` stops it when its owner dies).
"""

from .queue import DEFAULT_SCHEMA, PgJobQueue, drop_schema

__all__ = ["DEFAULT_SCHEMA", "PgJobQueue", "drop_schema"]
