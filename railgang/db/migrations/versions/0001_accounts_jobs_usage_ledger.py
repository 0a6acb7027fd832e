"""accounts, jobs, usage ledger

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('accounts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('level', sa.String(length=16), nullable=False),
    sa.Column('parent_id', sa.Integer(), nullable=True),
    sa.Column('guaranteed_gpus', sa.Integer(), nullable=False),
    sa.Column('limit_gpus', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("level IN ('org', 'dept', 'team')", name=op.f('ck_accounts_level')),
    sa.CheckConstraint('guaranteed_gpus >= 0', name=op.f('ck_accounts_guaranteed_nonneg')),
    sa.ForeignKeyConstraint(['parent_id'], ['accounts.id'], name=op.f('fk_accounts_parent_id_accounts')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_accounts')),
    sa.UniqueConstraint('name', name=op.f('uq_accounts_name'))
    )
    op.create_table('jobs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('slurm_job_id', sa.String(length=32), nullable=False),
    sa.Column('cluster', sa.String(length=64), nullable=False),
    sa.Column('account', sa.String(length=64), nullable=False),
    sa.Column('user', sa.String(length=64), nullable=False),
    sa.Column('gpus', sa.Integer(), nullable=False),
    sa.Column('priority_class', sa.Integer(), nullable=False),
    sa.Column('hints', sa.String(length=256), nullable=False),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('state', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
    sa.UniqueConstraint('cluster', 'slurm_job_id', name='cluster_job')
    )
    op.create_table('usage_records',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('segment', sa.Integer(), nullable=False),
    sa.Column('account', sa.String(length=64), nullable=False),
    sa.Column('gpu_type', sa.String(length=32), nullable=False),
    sa.Column('gpus', sa.Integer(), nullable=False),
    sa.Column('nodes', sa.String(length=1024), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('tier', sa.String(length=16), nullable=False),
    sa.Column('compute_fraction', sa.Float(), nullable=True),
    sa.Column('productive_fraction', sa.Float(), nullable=True),
    sa.CheckConstraint("tier IN ('guaranteed', 'borrowed', 'opportunistic')", name=op.f('ck_usage_records_tier')),
    sa.CheckConstraint('gpus > 0', name=op.f('ck_usage_records_gpus_positive')),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_usage_records_job_id_jobs')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_usage_records')),
    sa.UniqueConstraint('job_id', 'segment', name='job_segment')
    )


def downgrade() -> None:
    op.drop_table('usage_records')
    op.drop_table('jobs')
    op.drop_table('accounts')
