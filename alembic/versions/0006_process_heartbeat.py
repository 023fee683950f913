"""processes.heartbeat_at: when the supervisor of a process last said it is alive (a shared store)

On a store shared by several hosts a process on another host cannot be checked by its pid; its
supervisor writes this column every few seconds instead, and a heartbeat older than the timeout is
shown as lost, never as running.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

import sqlalchemy as sa
import sqlmodel

from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('processes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('heartbeat_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('processes', schema=None) as batch_op:
        batch_op.drop_column('heartbeat_at')
