"""Sources failing run after run (backed off, owner told once); monitors are quiet on empty days by default.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa



revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'source_failures',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('monitor_id', sa.Integer(), nullable=False),
        sa.Column('spec_key', sa.String(length=64), nullable=False),
        sa.Column('spec', sa.Text(), nullable=False),
        sa.Column('failures', sa.Integer(), nullable=False),
        sa.Column('last_reason', sa.Text(), nullable=False),
        sa.Column('first_failed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_failed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('retry_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('notified_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ['monitor_id'], ['monitors.id'], name=op.f('fk_source_failures_monitor_id_monitors'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_source_failures')),
        sa.UniqueConstraint('monitor_id', 'spec_key', name=op.f('uq_source_failures_monitor_id_spec_key')),
    )
    op.create_index(op.f('ix_source_failures_monitor_id'), 'source_failures', ['monitor_id'], unique=False)
    # "Nothing new" now sends nothing unless a chat asks for a note (/quiet <id> off); no chat could choose before.
    op.execute(sa.text('UPDATE monitors SET quiet = :quiet').bindparams(quiet=True))


def downgrade() -> None:
    op.drop_index(op.f('ix_source_failures_monitor_id'), table_name='source_failures')
    op.drop_table('source_failures')
