"""Remember the content type of a conditional-GET body, so a 304 is decoded with the right charset.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0002'
down_revision: Union[str, Sequence[str], None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('http_validators') as batch_op:
        batch_op.add_column(sa.Column('content_type', sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('http_validators') as batch_op:
        batch_op.drop_column('content_type')
