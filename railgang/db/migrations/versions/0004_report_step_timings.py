"""report: step timings for the communication-bound detector

Revision ID: 0004_report_step_timings
Revises: 0003
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = '0004_report_step_timings'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('step_timings',
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('t_epoch', sa.BigInteger(), nullable=False),
    sa.Column('step_s', sa.Float(), nullable=False),
    sa.Column('compute_s', sa.Float(), nullable=False),
    sa.CheckConstraint('step_s >= 0 AND compute_s >= 0', name=op.f('ck_step_timings_nonneg')),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_step_timings_job_id_jobs'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 't_epoch', name=op.f('pk_step_timings'))
    )


def downgrade() -> None:
    op.drop_table('step_timings')
