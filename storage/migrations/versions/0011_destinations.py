"""Destinations: Apprise URLs and signed webhooks that receive digests like chats (each has a chat row of its own).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # A new table needs no batch mode (SQLite's ALTER limits concern changes to existing tables).
    op.create_table(
        'destinations',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('chat_id', sa.Integer(), nullable=False),
        sa.Column('added_by_chat_id', sa.Integer(), nullable=True),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('secret', sa.String(length=128), nullable=True),
        sa.Column('label', sa.String(length=255), nullable=False),
        sa.Column('briefing_of_chat_id', sa.Integer(), nullable=True),
        sa.Column('failing_since', sa.DateTime(timezone=True), nullable=True),
        sa.Column('failure_told', sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['chat_id'], ['chats.id'], name=op.f('fk_destinations_chat_id_chats'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['added_by_chat_id'], ['chats.id'], name=op.f('fk_destinations_added_by_chat_id_chats'),
            ondelete='SET NULL',
        ),
        sa.ForeignKeyConstraint(
            ['briefing_of_chat_id'], ['chats.id'], name=op.f('fk_destinations_briefing_of_chat_id_chats'),
            ondelete='SET NULL',
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_destinations')),
        sa.UniqueConstraint('chat_id', name=op.f('uq_destinations_chat_id')),
    )
    op.create_index(op.f('ix_destinations_added_by_chat_id'), 'destinations', ['added_by_chat_id'])
    op.create_index(op.f('ix_destinations_briefing_of_chat_id'), 'destinations', ['briefing_of_chat_id'])


def downgrade() -> None:
    op.drop_index(op.f('ix_destinations_briefing_of_chat_id'), table_name='destinations')
    op.drop_index(op.f('ix_destinations_added_by_chat_id'), table_name='destinations')
    op.drop_table('destinations')
