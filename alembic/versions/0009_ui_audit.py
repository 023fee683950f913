"""ui_audit: one row per write action asked of the dashboard (the studio): who, what, when, the outcome

The run is kept by name, not by key, so the record of a removal outlives the run it removed.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08
"""

import sqlalchemy as sa
import sqlmodel

from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('ui_audit',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('run', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('who', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('action', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('command', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('ui_audit', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ui_audit_run'), ['run'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('ui_audit', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ui_audit_run'))
    op.drop_table('ui_audit')
