"""Migration 0008 (jobs.submit_epoch, issue 18 row 14) on a SQLite ledger that has rows: the
jobs table is rebuilt with foreign keys off, so segments and labels survive (with them on, the
rebuild's DROP TABLE would cascade the labels away), and two jobs may then share an id."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text

from railgang.db import migrate
from railgang.db.session import make_engine


def test_upgrade_keeps_rows_and_allows_a_reused_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    migrate.upgrade(url, "0007_node_states_sample_index")
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text("INSERT INTO jobs (id, slurm_job_id, cluster, account, user, gpus, "
                       "priority_class, hints, submitted_at, state) VALUES (1, '42', 'c', 'a', "
                       "'u', 8, 3, '', '2026-11-29 00:00:00.000000', 'COMPLETED')"))
        c.execute(text("INSERT INTO job_labels (job_id, key, value) VALUES (1, 'experiment', 'x')"))
        c.execute(text("INSERT INTO usage_records (job_id, segment, account, gpu_type, gpus, "
                       "nodes, started_at, tier, user, capacity, start_epoch, gpu_ids, source) "
                       "VALUES (1, 0, 'a', 'gpu', 8, 'n1', '2026-11-29 00:00:00.000000', "
                       "'guaranteed', 'u', 'reserved', 5, '', 'sacct')"))
    eng.dispose()
    assert migrate.upgrade(url) == migrate.head()
    eng = make_engine(url)
    with eng.begin() as c:
        assert c.execute(text("SELECT id, submit_epoch FROM jobs")).all() == [(1, 0)]
        assert c.execute(text("SELECT job_id, value FROM job_labels")).all() == [(1, "x")]
        assert c.execute(text("SELECT job_id FROM usage_records")).all() == [(1,)]
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        c.execute(text("INSERT INTO jobs (slurm_job_id, cluster, account, user, gpus, "
                       "priority_class, hints, submitted_at, state, submit_epoch) VALUES ('42', "
                       "'c', 'b', 'v', 2, 3, '', '2026-11-30 00:00:00.000000', 'RUNNING', 99)"))
    eng.dispose()
    with pytest.raises(RuntimeError, match="two jobs"):  # it would merge them again: refused
        command.downgrade(migrate.alembic_config(url), "0007_node_states_sample_index")
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text("DELETE FROM jobs WHERE submit_epoch = 99"))
    eng.dispose()
    command.downgrade(migrate.alembic_config(url), "0007_node_states_sample_index")
    eng = make_engine(url)
    with eng.begin() as c:
        assert c.execute(text("SELECT job_id, value FROM job_labels")).all() == [(1, "x")]
    eng.dispose()
