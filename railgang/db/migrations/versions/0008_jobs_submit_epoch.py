"""jobs: a job is (cluster, job id, submit time): Slurm reuses job ids (issue 18 row 14)

Existing rows get submit_epoch 0 ("before ids were told apart"); the ingest treats such a row as
the generation it always was and starts a new one only for a record submitted after it ended.

Revision ID: 0008_jobs_submit_epoch
Revises: 0007_node_states_sample_index
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = '0008_jobs_submit_epoch'
down_revision = '0007_node_states_sample_index'
branch_labels = None
depends_on = None


def _rebuild_jobs(change) -> None:  # type: ignore[no-untyped-def]
    """SQLite cannot drop a constraint: batch mode copies ``jobs``, and dropping the old table
    with foreign keys on would delete (CASCADE) or refuse (usage_records) every row pointing at
    it. Foreign keys are off for the copy (pysqlite has no transaction open before the first
    write of this connection) and checked afterwards."""
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite:
        op.execute("PRAGMA foreign_keys=OFF")
        if bind.exec_driver_sql("PRAGMA foreign_keys").scalar() and bind.exec_driver_sql(
                "SELECT count(*) FROM jobs").scalar():
            raise RuntimeError("cannot turn SQLite foreign keys off to rebuild jobs; run "
                               "`railgang db upgrade` again on its own")
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        change(batch_op)
    if sqlite:
        bad = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if bad:
            raise RuntimeError(f"foreign keys broken by the jobs rebuild: {bad[:5]}")
        op.execute("PRAGMA foreign_keys=ON")


def upgrade() -> None:
    def change(batch_op) -> None:  # type: ignore[no-untyped-def]
        batch_op.add_column(sa.Column('submit_epoch', sa.BigInteger(), server_default='0',
                                      nullable=False))
        batch_op.drop_constraint('cluster_job', type_='unique')
        batch_op.create_unique_constraint('cluster_job_submit',
                                          ['cluster', 'slurm_job_id', 'submit_epoch'])
    _rebuild_jobs(change)


def downgrade() -> None:
    # refused while two jobs share an id: merging them is what 0008 prevents (checked first: a
    # SQLite rebuild that fails half-way leaves its temporary table behind)
    dup = op.get_bind().exec_driver_sql(
        "SELECT cluster, slurm_job_id FROM jobs GROUP BY cluster, slurm_job_id "
        "HAVING count(*) > 1 LIMIT 1").first()
    if dup is not None:
        raise RuntimeError(f"cannot downgrade below 0008: job {dup[1]} of cluster {dup[0]} is "
                           "two jobs (a reused id); delete one first")

    def change(batch_op) -> None:  # type: ignore[no-untyped-def]
        batch_op.drop_constraint('cluster_job_submit', type_='unique')
        batch_op.create_unique_constraint('cluster_job', ['cluster', 'slurm_job_id'])
        batch_op.drop_column('submit_epoch')
    _rebuild_jobs(change)
