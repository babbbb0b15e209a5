"""Stored delivery progress: how many parts of a delivery were confirmed sent, and which process holds its claim.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('deliveries') as batch_op:
        batch_op.add_column(sa.Column('parts_sent', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('claimed_by', sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('deliveries') as batch_op:
        batch_op.drop_column('claimed_by')
        batch_op.drop_column('parts_sent')
