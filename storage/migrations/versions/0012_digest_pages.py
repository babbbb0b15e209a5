"""A token per digest page: the unguessable part of the URL of one run's web page and its files.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0012'
down_revision: Union[str, Sequence[str], None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # A new table needs no batch mode (SQLite's ALTER limits concern changes to existing tables).
    op.create_table(
        'digest_pages',
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('token', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['run_id'], ['runs.id'], name=op.f('fk_digest_pages_run_id_runs'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('run_id', name=op.f('pk_digest_pages')),
        sa.UniqueConstraint('token', name=op.f('uq_digest_pages_token')),
    )


def downgrade() -> None:
    op.drop_table('digest_pages')
