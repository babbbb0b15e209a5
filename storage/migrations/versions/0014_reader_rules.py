"""Rules per reader: one chat's own rules on a monitor it receives, and what they left out of each delivery.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0014'
down_revision: Union[str, Sequence[str], None] = '0013'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'reader_rules',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('monitor_id', sa.Integer(), nullable=False),
        sa.Column('chat_id', sa.Integer(), nullable=False),
        sa.Column('rules', sa.JSON(), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['monitor_id'], ['monitors.id'], name=op.f('fk_reader_rules_monitor_id_monitors'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['chat_id'], ['chats.id'], name=op.f('fk_reader_rules_chat_id_chats'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_reader_rules')),
        sa.UniqueConstraint('monitor_id', 'chat_id', name=op.f('uq_reader_rules_monitor_id_chat_id')),
    )
    op.create_index(op.f('ix_reader_rules_chat_id'), 'reader_rules', ['chat_id'], unique=False)
    with op.batch_alter_table('deliveries') as batch_op:
        batch_op.add_column(sa.Column('left_out', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('deliveries') as batch_op:
        batch_op.drop_column('left_out')
    op.drop_index(op.f('ix_reader_rules_chat_id'), table_name='reader_rules')
    op.drop_table('reader_rules')
