"""gpu_waiters.need: how many of the GPUs it lists a waiting run needs (None: all of them)

A run now takes any free GPUs among those visible, not the first ones, so a queue entry lists the candidates
and the count it waits for.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""

import sqlalchemy as sa

from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('gpu_waiters', schema=None) as batch_op:
        batch_op.add_column(sa.Column('need', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('gpu_waiters', schema=None) as batch_op:
        batch_op.drop_column('need')
