"""Pending alert checks: a stored run whose alerts are still to be checked, written in the run's own transaction so
a process that stops before checking them leaves the check for the recovery pass.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0016'
down_revision: Union[str, Sequence[str], None] = '0015'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'pending_alert_checks',
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('monitor_id', sa.Integer(), nullable=False),
        sa.Column('stories', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['run_id'], ['runs.id'], name=op.f('fk_pending_alert_checks_run_id_runs'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['monitor_id'], ['monitors.id'], name=op.f('fk_pending_alert_checks_monitor_id_monitors'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('run_id', name=op.f('pk_pending_alert_checks')),
    )
    op.create_index(
        op.f('ix_pending_alert_checks_monitor_id'), 'pending_alert_checks', ['monitor_id'], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f('ix_pending_alert_checks_monitor_id'), table_name='pending_alert_checks')
    op.drop_table('pending_alert_checks')
