"""Feedback marks keep the marked story's embedding vector (model and half-precision values), when it had one.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0017'
down_revision: Union[str, Sequence[str], None] = '0016'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('feedback_marks') as batch_op:
        batch_op.add_column(sa.Column('vector', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('feedback_marks') as batch_op:
        batch_op.drop_column('vector')
