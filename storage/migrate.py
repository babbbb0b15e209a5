"""Alembic wiring: the migration config (no alembic.ini needed) and `upgrade_database` to head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection

from storage.engine import _create_engine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

MIGRATION_LOCK_KEY = 0x4C4F4F4B_0001
"""The PostgreSQL advisory lock that makes processes starting together migrate one after another."""

FOREIGN_PREFIXES = ("procrastinate_",)
"""Database objects that belong to a library (the job queue's tables), not to Lookout's models."""


def owned_by_lookout(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's `include_name` filter: compare only Lookout's own tables with the models."""
    return not (type_ == "table" and name is not None and name.startswith(FOREIGN_PREFIXES))


def migration_config(url: str | None = None) -> Config:
    """An Alembic config pointing at storage/migrations; `url` travels in `attributes`, not in the
    ini text, so a `%` in a password needs no escaping."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    if url is not None:
        config.attributes["url"] = url
    return config


async def upgrade_database(url: str, *, revision: str = "head") -> None:
    """Apply every migration up to `revision` (creating a SQLite file and its directory if needed)."""
    # Foreign keys stay off while migrating: SQLite's batch mode rebuilds tables by copy-and-drop,
    # which must not cascade into other tables.
    engine = _create_engine(url, foreign_keys=False)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade, migration_config(url), revision)
    finally:
        await engine.dispose()


def _upgrade(connection: Connection, config: Config, revision: str) -> None:
    if connection.dialect.name == "postgresql":
        # Several processes (two web, two workers) start at once on one database: the first migrates, the
        # others wait here and then find nothing left to do. Released when the transaction ends.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def pending_migrations(url: str) -> list[str]:
    """The migrations not yet applied to the database at `url`, oldest first (empty: its schema is current).

    Reads only (the database is not changed, though SQLite creates a missing file); raises what the driver raises
    when the database cannot be reached, and `LookupError` when it stands at a revision this code does not know
    (a newer Lookout migrated it)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    engine = _create_engine(url, foreign_keys=False)
    try:
        async with engine.connect() as connection:
            current = await connection.run_sync(lambda sync: MigrationContext.configure(sync).get_current_heads())
    finally:
        await engine.dispose()
    script = ScriptDirectory.from_config(migration_config(url))
    known = {revision.revision for revision in script.walk_revisions()}
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        raise LookupError(f"the database is at revision {', '.join(unknown)}, which this Lookout does not know")
    pending = [revision.revision for revision in script.iterate_revisions("heads", current[0] if current else "base")]
    return list(reversed(pending))
