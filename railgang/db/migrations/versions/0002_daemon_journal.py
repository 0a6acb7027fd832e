"""daemon: action journal, cycles, per-job explanations, leader

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('action_journal',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('cycle_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('job_id', sa.String(length=32), nullable=True),
    sa.Column('node', sa.String(length=64), nullable=True),
    sa.Column('payload', sa.Text(), nullable=False),
    sa.Column('idem_key', sa.String(length=64), nullable=False),
    sa.Column('state', sa.String(length=12), nullable=False),
    sa.Column('detail', sa.String(length=512), nullable=False),
    sa.Column('planned_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('settled_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("state IN ('planned', 'applied', 'failed', 'abandoned')", name=op.f('ck_action_journal_state')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_action_journal')),
    sa.UniqueConstraint('idem_key', name=op.f('uq_action_journal_idem_key'))
    )
    with op.batch_alter_table('action_journal', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_action_journal_cycle_id'), ['cycle_id'], unique=False)
        batch_op.create_index('ix_action_journal_state_id', ['state', 'id'], unique=False)

    op.create_table('daemon_cycles',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('leader', sa.String(length=128), nullable=False),
    sa.Column('policy', sa.String(length=32), nullable=False),
    sa.Column('pending', sa.Integer(), nullable=False),
    sa.Column('running', sa.Integer(), nullable=False),
    sa.Column('actions', sa.Integer(), nullable=False),
    sa.Column('failed', sa.Integer(), nullable=False),
    sa.Column('timings', sa.Text(), nullable=False),
    sa.Column('error', sa.String(length=512), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_daemon_cycles'))
    )
    with op.batch_alter_table('daemon_cycles', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_daemon_cycles_started_at'), ['started_at'], unique=False)

    op.create_table('daemon_leader',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=128), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('acquired_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('backend', sa.String(length=16), nullable=False),
    sa.Column('policy', sa.String(length=32), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_daemon_leader'))
    )
    op.create_table('job_explanations',
    sa.Column('job_id', sa.String(length=32), nullable=False),
    sa.Column('cycle_id', sa.Integer(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('state', sa.String(length=12), nullable=False),
    sa.Column('account', sa.String(length=64), nullable=False),
    sa.Column('priority_class', sa.Integer(), nullable=False),
    sa.Column('gpus', sa.Integer(), nullable=False),
    sa.Column('reason', sa.String(length=32), nullable=True),
    sa.Column('detail', sa.String(length=512), nullable=False),
    sa.Column('position', sa.Integer(), nullable=True),
    sa.Column('queue_length', sa.Integer(), nullable=True),
    sa.Column('nodes', sa.String(length=1024), nullable=False),
    sa.Column('data', sa.Text(), nullable=False),
    sa.CheckConstraint("state IN ('waiting', 'running', 'gone')", name=op.f('ck_job_explanations_state')),
    sa.PrimaryKeyConstraint('job_id', name=op.f('pk_job_explanations'))
    )
    with op.batch_alter_table('job_explanations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_job_explanations_updated_at'), ['updated_at'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('job_explanations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_job_explanations_updated_at'))

    op.drop_table('job_explanations')
    op.drop_table('daemon_leader')
    with op.batch_alter_table('daemon_cycles', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_daemon_cycles_started_at'))

    op.drop_table('daemon_cycles')
    with op.batch_alter_table('action_journal', schema=None) as batch_op:
        batch_op.drop_index('ix_action_journal_state_id')
        batch_op.drop_index(batch_op.f('ix_action_journal_cycle_id'))

    op.drop_table('action_journal')
