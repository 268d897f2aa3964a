"""The queue on PostgreSQL (psycopg 3): ``pip install labqueue[postgres]``.

``PgJobQueue`` has JobQueue's API and rules; ``labqueue.open_queue(url)`` picks it for a
``postgresql://`` URL. ``labqueue.postgres.server.throwaway_server()`` starts a
disposable server for tests and notebooks.
"""

from .queue import DEFAULT_SCHEMA, PgJobQueue, drop_schema

__all__ = ["DEFAULT_SCHEMA", "PgJobQueue", "drop_schema"]
