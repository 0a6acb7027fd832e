"""quotas, priority classes and grants, rates, quota events, API tokens, audit log; ledger
segments keyed by (job, start) with labels, watermarks and telemetry samples

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def _epoch(value: object) -> int:
    if isinstance(value, str):  # SQLite hands DateTime back as text inside a migration
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp())


def upgrade() -> None:
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=12), nullable=False),
    sa.Column('role', sa.String(length=12), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("role IN ('admin', 'team-admin', 'team-reader')", name=op.f('ck_api_tokens_role')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('name', name=op.f('uq_api_tokens_name')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('actor', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=32), nullable=False),
    sa.Column('target', sa.String(length=128), nullable=False),
    sa.Column('before', sa.Text(), nullable=True),
    sa.Column('after', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_log'))
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index('ix_audit_log_at', ['at'], unique=False)

    op.create_table('gpu_samples',
    sa.Column('node', sa.String(length=64), nullable=False),
    sa.Column('gpu', sa.Integer(), nullable=False),
    sa.Column('at_epoch_ms', sa.BigInteger(), nullable=False),
    sa.Column('sm_util', sa.Float(), nullable=False),
    sa.Column('mem_used_mib', sa.Float(), nullable=True),
    sa.Column('power_w', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('node', 'gpu', 'at_epoch_ms', name=op.f('pk_gpu_samples'))
    )
    op.create_table('ledger_watermarks',
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('ingested_until', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('source', name=op.f('pk_ledger_watermarks'))
    )
    op.create_table('priority_classes',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('preemptible', sa.Boolean(), nullable=False),
    sa.Column('max_time_s', sa.Integer(), nullable=True),
    sa.Column('needs_grant', sa.Boolean(), nullable=False),
    sa.Column('description', sa.String(length=256), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_priority_classes')),
    sa.UniqueConstraint('name', name=op.f('uq_priority_classes_name'))
    )
    op.bulk_insert(sa.table('priority_classes', sa.column('id', sa.Integer()), sa.column('name', sa.String()),
                            sa.column('preemptible', sa.Boolean()), sa.column('max_time_s', sa.Integer()),
                            sa.column('needs_grant', sa.Boolean()), sa.column('description', sa.String())), [
        {"id": 0, "name": "serving", "preemptible": False, "max_time_s": None, "needs_grant": True,
         "description": "never preempted; granted to serving accounts"},
        {"id": 1, "name": "production", "preemptible": True, "max_time_s": None, "needs_grant": True,
         "description": "production training; preempts classes 2-3"},
        {"id": 2, "name": "interactive", "preemptible": True, "max_time_s": 4 * 3600, "needs_grant": True,
         "description": "short, high-priority work with a short time limit"},
        {"id": 3, "name": "batch", "preemptible": True, "max_time_s": None, "needs_grant": False,
         "description": "everything else; anyone may use it"},
    ])
    op.create_table('rates',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('gpu_type', sa.String(length=32), nullable=False),
    sa.Column('capacity', sa.String(length=16), nullable=False),
    sa.Column('per_gpu_hour', sa.Float(), nullable=False),
    sa.Column('currency', sa.String(length=8), nullable=False),
    sa.CheckConstraint("capacity IN ('reserved', 'on-demand', 'spot', 'borrowed')", name=op.f('ck_rates_capacity')),
    sa.CheckConstraint('per_gpu_hour >= 0', name=op.f('ck_rates_nonneg')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rates')),
    sa.UniqueConstraint('gpu_type', 'capacity', name='gpu_type_capacity')
    )
    op.create_table('account_quotas',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.Column('gpu_type', sa.String(length=32), nullable=False),
    sa.Column('guaranteed_gpus', sa.Integer(), nullable=False),
    sa.Column('limit_gpus', sa.Integer(), nullable=True),
    sa.CheckConstraint('guaranteed_gpus >= 0', name=op.f('ck_account_quotas_guaranteed_nonneg')),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], name=op.f('fk_account_quotas_account_id_accounts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_account_quotas')),
    sa.UniqueConstraint('account_id', 'gpu_type', name='account_gpu_type')
    )
    op.create_table('api_token_teams',
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], name=op.f('fk_api_token_teams_account_id_accounts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['token_id'], ['api_tokens.id'], name=op.f('fk_api_token_teams_token_id_api_tokens'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('token_id', 'account_id', name=op.f('pk_api_token_teams'))
    )
    op.create_table('class_grants',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('class_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('subject', sa.String(length=64), nullable=False),
    sa.Column('granted_by', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("kind IN ('account', 'user', 'qos')", name=op.f('ck_class_grants_kind')),
    sa.ForeignKeyConstraint(['class_id'], ['priority_classes.id'], name=op.f('fk_class_grants_class_id_priority_classes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_class_grants')),
    sa.UniqueConstraint('class_id', 'kind', 'subject', name='class_kind_subject')
    )
    op.create_table('job_labels',
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=32), nullable=False),
    sa.Column('value', sa.String(length=128), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_labels_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'key', name=op.f('pk_job_labels'))
    )
    with op.batch_alter_table('job_labels', schema=None) as batch_op:
        batch_op.create_index('ix_job_labels_key_value', ['key', 'value'], unique=False)

    op.create_table('progress_samples',
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('t_epoch', sa.BigInteger(), nullable=False),
    sa.Column('step', sa.Float(), nullable=False),
    sa.Column('sps', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_progress_samples_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 't_epoch', name=op.f('pk_progress_samples'))
    )
    op.create_table('quota_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('state', sa.String(length=12), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.Column('gpu_type', sa.String(length=32), nullable=False),
    sa.Column('gpus', sa.Integer(), nullable=False),
    sa.Column('detail', sa.String(length=512), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_by', sa.String(length=64), nullable=True),
    sa.CheckConstraint("kind IN ('borrow', 'reclaim', 'lose-proposal', 'restore')", name=op.f('ck_quota_events_kind')),
    sa.CheckConstraint("state IN ('recorded', 'proposed', 'approved', 'rejected')", name=op.f('ck_quota_events_state')),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], name=op.f('fk_quota_events_account_id_accounts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_quota_events'))
    )
    with op.batch_alter_table('quota_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_quota_events_account_id'), ['account_id'], unique=False)

    with op.batch_alter_table('usage_records', schema=None) as batch_op:
        batch_op.add_column(sa.Column('user', sa.String(length=64), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('capacity', sa.String(length=16), nullable=False, server_default='reserved'))
        batch_op.add_column(sa.Column('start_epoch', sa.BigInteger(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('end_epoch', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('gpu_ids', sa.String(length=1024), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('source', sa.String(length=16), nullable=False, server_default='sacct'))
        batch_op.drop_constraint('job_segment', type_='unique')
    # rows written before 0003 get their epochs from their timestamps (the new segment key)
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, started_at, ended_at FROM usage_records")).all()
    for rid, started, ended in rows:
        conn.execute(sa.text("UPDATE usage_records SET start_epoch = :s, end_epoch = :e WHERE id = :i"),
                     {"s": _epoch(started), "e": _epoch(ended) if ended is not None else None, "i": rid})
    with op.batch_alter_table('usage_records', schema=None) as batch_op:
        batch_op.create_index('ix_usage_records_account_start', ['account', 'start_epoch'], unique=False)
        batch_op.create_index('ix_usage_records_end_epoch', ['end_epoch'], unique=False)
        batch_op.create_unique_constraint('job_start', ['job_id', 'start_epoch'])



def downgrade() -> None:
    with op.batch_alter_table('usage_records', schema=None) as batch_op:
        batch_op.drop_constraint('job_start', type_='unique')
        batch_op.drop_index('ix_usage_records_end_epoch')
        batch_op.drop_index('ix_usage_records_account_start')
        batch_op.create_unique_constraint('job_segment', ['job_id', 'segment'])
        batch_op.drop_column('source')
        batch_op.drop_column('gpu_ids')
        batch_op.drop_column('end_epoch')
        batch_op.drop_column('start_epoch')
        batch_op.drop_column('capacity')
        batch_op.drop_column('user')

    with op.batch_alter_table('quota_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_quota_events_account_id'))

    op.drop_table('quota_events')
    op.drop_table('progress_samples')
    with op.batch_alter_table('job_labels', schema=None) as batch_op:
        batch_op.drop_index('ix_job_labels_key_value')

    op.drop_table('job_labels')
    op.drop_table('class_grants')
    op.drop_table('api_token_teams')
    op.drop_table('account_quotas')
    op.drop_table('rates')
    op.drop_table('priority_classes')
    op.drop_table('ledger_watermarks')
    op.drop_table('gpu_samples')
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_log_at')

    op.drop_table('audit_log')
    op.drop_table('api_tokens')
