"""Pin a delivery's language and timezone once its first part went out: a resend goes on in the same rendering.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('deliveries') as batch_op:
        batch_op.add_column(sa.Column('rendered_language', sa.String(length=35), nullable=True))
        batch_op.add_column(sa.Column('rendered_timezone', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('deliveries') as batch_op:
        batch_op.drop_column('rendered_timezone')
        batch_op.drop_column('rendered_language')
