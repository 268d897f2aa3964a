"""The PostgreSQL driver (labqueue.core.Driver; psycopg 3): driver.py the connection and its
statements, sql.py every statement in PostgreSQL's dialect, schema.py the queue's schema
(its creation, checks and migrations). PgJobQueue, over this driver, is labqueue.postgres."""
