"""estimate_scores: the start-time intervals' calibration scores, kept across daemon restarts

Revision ID: 0006_estimate_scores
Revises: 0005_jobs_run_time
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = '0006_estimate_scores'
down_revision = '0005_jobs_run_time'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('estimate_scores',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('cluster', sa.String(length=64), nullable=False),
    sa.Column('settled_epoch', sa.BigInteger(), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_estimate_scores'))
    )
    op.create_index('ix_estimate_scores_cluster_id', 'estimate_scores', ['cluster', 'id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_estimate_scores_cluster_id', table_name='estimate_scores')
    op.drop_table('estimate_scores')
