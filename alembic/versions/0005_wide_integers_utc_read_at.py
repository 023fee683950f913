"""64-bit sizes, mtimes and log offsets; media_facts.read_at a UTC timestamp like every other

Found by running the migrations on PostgreSQL, where types are enforced: ``media_facts.mtime_ns``
(nanoseconds since 1970) and ``size`` (files past 2 GiB) and ``processes.log_offset`` (logs past
2 GiB) overflow a 32-bit INTEGER; 0004 created ``read_at`` as a naive DateTime where the models say
SQLModel's UTCDateTime. SQLite stores all of these alike; a store shared on a server now has the
models' schema exactly.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

import sqlalchemy as sa
import sqlmodel

from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('media_facts', schema=None) as batch_op:
        batch_op.alter_column('read_at', existing_type=sa.DateTime(), type_=sqlmodel.sql.sqltypes.UTCDateTime(),
                              existing_nullable=False)
        batch_op.alter_column('size', existing_type=sa.Integer(), type_=sa.BigInteger(), existing_nullable=False)
        batch_op.alter_column('mtime_ns', existing_type=sa.Integer(), type_=sa.BigInteger(), existing_nullable=False)
    with op.batch_alter_table('processes', schema=None) as batch_op:
        batch_op.alter_column('log_offset', existing_type=sa.Integer(), type_=sa.BigInteger(),
                              existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('processes', schema=None) as batch_op:
        batch_op.alter_column('log_offset', existing_type=sa.BigInteger(), type_=sa.Integer(),
                              existing_nullable=False)
    with op.batch_alter_table('media_facts', schema=None) as batch_op:
        batch_op.alter_column('mtime_ns', existing_type=sa.BigInteger(), type_=sa.Integer(), existing_nullable=False)
        batch_op.alter_column('size', existing_type=sa.BigInteger(), type_=sa.Integer(), existing_nullable=False)
        batch_op.alter_column('read_at', existing_type=sqlmodel.sql.sqltypes.UTCDateTime(), type_=sa.DateTime(),
                              existing_nullable=False)
