"""Alerts: a chat's "tell me at once when …" on a monitor, and the stories each one fired for (once each).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0015'
down_revision: Union[str, Sequence[str], None] = '0014'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # New tables need no batch mode (SQLite's ALTER limits concern changes to existing tables).
    op.create_table(
        'alerts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('chat_id', sa.Integer(), nullable=False),
        sa.Column('monitor_id', sa.Integer(), nullable=False),
        sa.Column('topic', sa.Text(), nullable=False),
        sa.Column('condition', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['chat_id'], ['chats.id'], name=op.f('fk_alerts_chat_id_chats'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(
            ['monitor_id'], ['monitors.id'], name=op.f('fk_alerts_monitor_id_monitors'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_alerts')),
    )
    op.create_index(op.f('ix_alerts_chat_id'), 'alerts', ['chat_id'], unique=False)
    op.create_index(op.f('ix_alerts_monitor_id'), 'alerts', ['monitor_id'], unique=False)
    op.create_table(
        'alert_firings',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('alert_id', sa.Integer(), nullable=False),
        sa.Column('story_key', sa.String(length=255), nullable=False),
        sa.Column('item_ids', sa.JSON(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=True),
        sa.Column('fired_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['alert_id'], ['alerts.id'], name=op.f('fk_alert_firings_alert_id_alerts'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_alert_firings_run_id_runs'), ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_firings')),
        sa.UniqueConstraint('alert_id', 'story_key', name=op.f('uq_alert_firings_alert_id_story_key')),
    )


def downgrade() -> None:
    op.drop_table('alert_firings')
    op.drop_index(op.f('ix_alerts_monitor_id'), table_name='alerts')
    op.drop_index(op.f('ix_alerts_chat_id'), table_name='alerts')
    op.drop_table('alerts')
