"""jobs: time limit and actual run time of finished jobs (start-time estimate history)

Revision ID: 0005_jobs_run_time
Revises: 0004_report_step_timings
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = '0005_jobs_run_time'
down_revision = '0004_report_step_timings'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('jobs', sa.Column('time_limit_s', sa.Integer(), nullable=True))
    op.add_column('jobs', sa.Column('run_s', sa.Integer(), nullable=True))
    op.add_column('jobs', sa.Column('ended_epoch', sa.BigInteger(), nullable=True))
    op.create_index(op.f('ix_jobs_ended_epoch'), 'jobs', ['ended_epoch'], unique=False)


def downgrade() -> None:
    # plain DROP COLUMN (SQLite 3.35+): a batch copy of ``jobs`` would trip the foreign keys
    # of the tables that point at it
    op.drop_index(op.f('ix_jobs_ended_epoch'), table_name='jobs')
    for column in ('ended_epoch', 'run_s', 'time_limit_s'):
        op.drop_column('jobs', column)
