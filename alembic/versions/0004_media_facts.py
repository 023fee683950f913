"""media_facts: what reading each media file found, keyed by path, size and mtime

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""

import sqlalchemy as sa
import sqlmodel

from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'media_facts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('path', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('size', sa.Integer(), nullable=False),
        sa.Column('mtime_ns', sa.Integer(), nullable=False),
        sa.Column('facts', sa.JSON(), nullable=False),
        sa.Column('read_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('media_facts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_media_facts_path'), ['path'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('media_facts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_media_facts_path'))
    op.drop_table('media_facts')
