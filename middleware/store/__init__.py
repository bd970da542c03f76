"""The store: its protocol, the SQLite and PostgreSQL implementations, the job queue, the writer lock
and redaction."""
