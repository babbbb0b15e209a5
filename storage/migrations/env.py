"""Alembic environment: runs on a connection handed over by storage.migrate, or (for developers'
`alembic revision --autogenerate`) on its own async engine. It never configures logging."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy.engine import Connection

from storage.engine import _create_engine
from storage.migrate import owned_by_lookout
from storage.models import Base
from storage.types import UTCDateTime

config = context.config
target_metadata = Base.metadata


def render_item(kind: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Write our UTC type as the plain column type it stores, so migrations don't import our code."""
    if kind == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def configure_context(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=render_item,
        include_name=owned_by_lookout,
    )


def run_on(connection: Connection) -> None:
    configure_context(connection)
    with context.begin_transaction():
        context.run_migrations()


def database_url() -> str:
    """The URL from storage.migrate, else `-x url=...`, else `sqlalchemy.url` in storage/alembic.ini."""
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    url = url or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=sqlite+aiosqlite:///path/to.db")
    return str(url)


async def run_with_own_engine() -> None:
    engine = _create_engine(database_url(), foreign_keys=False)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(run_on)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif (shared := config.attributes.get("connection")) is not None:
    run_on(shared)
else:
    asyncio.run(run_with_own_engine())
