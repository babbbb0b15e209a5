"""Conversation state that outlives the process (the open confirmation, the "told once" flag, a revision for
background folds) and usage kept per kind of model call (chat, memory, monitor, collect, embedding).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('conversations') as batch_op:
        batch_op.add_column(sa.Column('confirmation_token', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('confirmation', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('told_no_model', sa.Boolean(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('revision', sa.Integer(), server_default='0', nullable=False))
    with op.batch_alter_table('usage') as batch_op:
        batch_op.add_column(sa.Column('kind', sa.String(length=32), server_default='earlier', nullable=False))
        batch_op.drop_constraint('uq_usage_chat_id_day', type_='unique')
        batch_op.create_unique_constraint('uq_usage_chat_id_day_kind', ['chat_id', 'day', 'kind'])


def downgrade() -> None:
    # one row per chat and day again: each day's kinds added up into its first row
    sums = ', '.join(
        f"{column} = (SELECT sum(u.{column}) FROM usage u WHERE u.chat_id = usage.chat_id AND u.day = usage.day)"
        for column in ('requests', 'input_tokens', 'output_tokens', 'cost')
    )
    first_rows = 'SELECT min(id) FROM usage GROUP BY chat_id, day'
    op.execute(f'UPDATE usage SET {sums} WHERE id IN ({first_rows})')
    op.execute(f'DELETE FROM usage WHERE id NOT IN ({first_rows})')
    with op.batch_alter_table('usage') as batch_op:
        batch_op.drop_constraint('uq_usage_chat_id_day_kind', type_='unique')
        batch_op.drop_column('kind')
        batch_op.create_unique_constraint('uq_usage_chat_id_day', ['chat_id', 'day'])
    with op.batch_alter_table('conversations') as batch_op:
        batch_op.drop_column('revision')
        batch_op.drop_column('told_no_model')
        batch_op.drop_column('confirmation')
        batch_op.drop_column('confirmation_token')
