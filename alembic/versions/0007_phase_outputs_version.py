"""phase_runs.outputs_version: the schema version of a phase's stored outputs

Phase outputs became typed, versioned models (engine.outputs.PhaseOutputs). Rows written before
keep version 0, which each model's ``upgrade`` reads; nothing stored is rewritten.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

import sqlalchemy as sa

from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('phase_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('outputs_version', sa.Integer(), server_default='0', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('phase_runs', schema=None) as batch_op:
        batch_op.drop_column('outputs_version')
