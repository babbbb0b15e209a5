"""Alembic wiring: the migration config (no alembic.ini needed) and `upgrade_database` to head.

Guarantee: a database already at the newest migration is recognised with one read of `alembic_version`, without
importing Alembic (a third of a CLI command's start-up); anything else (a new or older database, several heads, a
migration file this reading does not follow) goes through Alembic as before.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from storage.engine import _create_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

_REVISION_LINE = re.compile(r"^(down_revision|revision)\b[^=\n]*=\s*(.+?)\s*$", re.MULTILINE)
_QUOTED = re.compile(r"""^(['"])([\w.-]+)\1$""")

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
    from alembic.config import Config

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
        head = newest_revision() if revision == "head" else None
        if head is not None:
            async with engine.connect() as connection:
                if await connection.run_sync(_applied_revisions) == [head]:
                    return
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade, migration_config(url), revision)
    finally:
        await engine.dispose()


@cache
def newest_revision() -> str | None:
    """The one head of storage/migrations/versions, read from the files' `revision` and `down_revision` lines, or
    None when they do not make one plain chain to a single head (Alembic then decides)."""
    revisions: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        found = {match.group(1): match.group(2) for match in _REVISION_LINE.finditer(source)}
        own = _QUOTED.match(found.get("revision", ""))
        down = found.get("down_revision", "")
        parent = _QUOTED.match(down)
        if own is None or (parent is None and down != "None"):
            return None  # a merge (a tuple of parents), or a form this reading does not know
        revisions[own.group(2)] = parent.group(2) if parent else None
    parents = set(revisions.values())
    heads = [revision for revision in revisions if revision not in parents]
    roots = [revision for revision, parent in revisions.items() if parent is None]
    if len(heads) != 1 or len(roots) != 1 or not parents - {None} <= revisions.keys():
        return None
    return heads[0]


def _applied_revisions(connection: Connection) -> list[str]:
    """The revisions `alembic_version` holds (none when the table does not exist yet)."""
    if not inspect(connection).has_table("alembic_version"):
        return []
    return [str(row[0]) for row in connection.execute(text("SELECT version_num FROM alembic_version"))]


def _upgrade(connection: Connection, config: Config, revision: str) -> None:
    from alembic import command

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
