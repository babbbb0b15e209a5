"""Subscriptions as a way to use Lookout: shared monitors, a subscriber's own pause and delivery mode, each chat's
morning briefing, and digests written again in the other languages of a monitor's subscribers.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('monitors') as batch_op:
        batch_op.add_column(sa.Column('shared', sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table('subscriptions') as batch_op:
        batch_op.add_column(sa.Column('paused', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('delivery', sa.String(length=16), nullable=False, server_default='auto'))
    with op.batch_alter_table('chats') as batch_op:
        batch_op.add_column(sa.Column('briefing_schedule', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('briefing_next_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('briefing_since', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f('ix_chats_briefing_next_at'), ['briefing_next_at'])
    with op.batch_alter_table('runs') as batch_op:
        batch_op.add_column(sa.Column('language_digests', sa.JSON(), nullable=False, server_default='{}'))


def downgrade() -> None:
    with op.batch_alter_table('runs') as batch_op:
        batch_op.drop_column('language_digests')
    with op.batch_alter_table('chats') as batch_op:
        batch_op.drop_index(batch_op.f('ix_chats_briefing_next_at'))
        batch_op.drop_column('briefing_since')
        batch_op.drop_column('briefing_next_at')
        batch_op.drop_column('briefing_schedule')
    with op.batch_alter_table('subscriptions') as batch_op:
        batch_op.drop_column('delivery')
        batch_op.drop_column('paused')
    with op.batch_alter_table('monitors') as batch_op:
        batch_op.drop_column('shared')
