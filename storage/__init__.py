"""Storage: SQLAlchemy models, engine and sessions, repositories returning domain records, Alembic migrations."""
