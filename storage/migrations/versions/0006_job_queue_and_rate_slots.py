"""Scale-out: procrastinate's job queue schema (PostgreSQL only) and the shared rate-limit slots.

procrastinate keeps its jobs, workers' heartbeats and periodic slots in its own tables, functions and
triggers; its `schema.sql` (the version locked in uv.lock) is applied here so `lookout db upgrade` is the one
way a database is set up. A later procrastinate release that changes its schema ships SQL files in
`procrastinate/sql/migrations`: a new Alembic migration applies the new ones, in order.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.util import await_only


revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _execute_script(sql: str) -> None:
    """Run a multi-statement SQL script on the migration's connection (inside its transaction)."""
    connection = op.get_bind()
    driver = connection.connection.driver_connection
    assert driver is not None
    if connection.dialect.driver == "asyncpg":
        # asyncpg prepares every statement it is given through SQLAlchemy; its own execute() without
        # arguments uses the simple query protocol, which accepts a script.
        await_only(driver.execute(sql))
    else:
        connection.exec_driver_sql(sql)


def upgrade() -> None:
    op.create_table(
        'rate_slots',
        sa.Column('key', sa.String(length=200), nullable=False),
        sa.Column('tat', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('key', name=op.f('pk_rate_slots')),
    )
    if op.get_bind().dialect.name == "postgresql":
        from procrastinate.schema import SchemaManager

        _execute_script(SchemaManager.get_schema())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _execute_script(
            """
            DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs,
                procrastinate_workers CASCADE;
            DROP TYPE IF EXISTS procrastinate_job_to_defer_v1, procrastinate_job_event_type,
                procrastinate_job_status CASCADE;
            DO $$
            DECLARE routine record;
            BEGIN
                FOR routine IN SELECT p.oid::regprocedure AS signature FROM pg_proc p
                    JOIN pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname = current_schema() AND p.proname LIKE 'procrastinate%'
                LOOP
                    EXECUTE 'DROP ROUTINE IF EXISTS ' || routine.signature || ' CASCADE';
                END LOOP;
            END $$;
            """
        )
    op.drop_table('rate_slots')
