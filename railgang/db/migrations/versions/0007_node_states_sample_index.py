"""node_states (the fleet's inventory and down/drained nodes for the report) and an index on
gpu_samples.at_epoch_ms for the report's time-window reads (issue 23)

Revision ID: 0007_node_states_sample_index
Revises: 0006_estimate_scores
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = '0007_node_states_sample_index'
down_revision = '0006_estimate_scores'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('node_states',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('cluster', sa.String(length=64), nullable=False),
    sa.Column('node', sa.String(length=64), nullable=False),
    sa.Column('at_epoch', sa.BigInteger(), nullable=False),
    sa.Column('state', sa.String(length=24), nullable=False),
    sa.Column('gpu_type', sa.String(length=32), nullable=False),
    sa.Column('gpus', sa.Integer(), nullable=False),
    sa.Column('reason', sa.String(length=256), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_node_states')),
    sa.UniqueConstraint('cluster', 'node', 'at_epoch', name='node_at')
    )
    op.create_index('ix_node_states_at_epoch', 'node_states', ['at_epoch'], unique=False)
    op.create_index('ix_gpu_samples_at_epoch_ms', 'gpu_samples', ['at_epoch_ms'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_gpu_samples_at_epoch_ms', table_name='gpu_samples')
    op.drop_index('ix_node_states_at_epoch', table_name='node_states')
    op.drop_table('node_states')
