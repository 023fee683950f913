"""gpu_leases and gpu_waiters: who holds which GPU, and the FIFO of runs waiting for GPUs

A lease row exists while its holder (pid + start time) or its run's launched processes live; a waiter
row keeps a queued run's place (its id) across the engine's death, so ``resume`` re-attaches to it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

import sqlalchemy as sa
import sqlmodel

from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('gpu_leases',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('gpu_index', sa.Integer(), nullable=False),
    sa.Column('gpu_uuid', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('host', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('create_time', sa.Float(), nullable=False),
    sa.Column('taken_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('host', 'gpu_uuid', name='uq_gpu_lease')
    )
    with op.batch_alter_table('gpu_leases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gpu_leases_run_id'), ['run_id'], unique=False)

    op.create_table('gpu_waiters',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('gpus', sa.JSON(), nullable=False),
    sa.Column('host', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('create_time', sa.Float(), nullable=False),
    sa.Column('entered_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('gpu_waiters', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gpu_waiters_run_id'), ['run_id'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('gpu_waiters', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gpu_waiters_run_id'))
    op.drop_table('gpu_waiters')
    with op.batch_alter_table('gpu_leases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gpu_leases_run_id'))
    op.drop_table('gpu_leases')
