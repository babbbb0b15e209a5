"""A feed token per monitor and per chat's briefing: the unguessable part of its Atom and JSON Feed URLs.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0010'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # A new table needs no batch mode (SQLite's ALTER limits concern changes to existing tables).
    op.create_table(
        'feed_tokens',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('token', sa.String(length=64), nullable=False),
        sa.Column('monitor_id', sa.Integer(), nullable=True),
        sa.Column('chat_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['monitor_id'], ['monitors.id'], name=op.f('fk_feed_tokens_monitor_id_monitors'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['chat_id'], ['chats.id'], name=op.f('fk_feed_tokens_chat_id_chats'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_feed_tokens')),
        sa.UniqueConstraint('token', name=op.f('uq_feed_tokens_token')),
        sa.UniqueConstraint('monitor_id', name=op.f('uq_feed_tokens_monitor_id')),
        sa.UniqueConstraint('chat_id', name=op.f('uq_feed_tokens_chat_id')),
    )


def downgrade() -> None:
    op.drop_table('feed_tokens')
