"""Readers' feedback marks per (monitor, chat), and the view of each digest a chat was shown after them.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0013'
down_revision: Union[str, Sequence[str], None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # New tables need no batch mode (SQLite's ALTER limits concern changes to existing tables).
    op.create_table(
        'feedback_marks',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('monitor_id', sa.Integer(), nullable=False),
        sa.Column('chat_id', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=True),
        sa.Column('story', sa.Integer(), nullable=True),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('outlets', sa.JSON(), nullable=False),
        sa.Column('terms', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['monitor_id'], ['monitors.id'], name=op.f('fk_feedback_marks_monitor_id_monitors'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['chat_id'], ['chats.id'], name=op.f('fk_feedback_marks_chat_id_chats'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['run_id'], ['runs.id'], name=op.f('fk_feedback_marks_run_id_runs'), ondelete='SET NULL'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_feedback_marks')),
    )
    op.create_index('ix_feedback_marks_reader', 'feedback_marks', ['monitor_id', 'chat_id'], unique=False)
    op.create_table(
        'reader_views',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('chat_id', sa.Integer(), nullable=False),
        sa.Column('view', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['run_id'], ['runs.id'], name=op.f('fk_reader_views_run_id_runs'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['chat_id'], ['chats.id'], name=op.f('fk_reader_views_chat_id_chats'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_reader_views')),
        sa.UniqueConstraint('run_id', 'chat_id', name=op.f('uq_reader_views_run_id_chat_id')),
    )
    op.create_index(op.f('ix_reader_views_chat_id'), 'reader_views', ['chat_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_reader_views_chat_id'), table_name='reader_views')
    op.drop_table('reader_views')
    op.drop_index('ix_feedback_marks_reader', table_name='feedback_marks')
    op.drop_table('feedback_marks')
