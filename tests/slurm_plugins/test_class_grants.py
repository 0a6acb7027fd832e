"""Priority classes are granted, not claimed, on the real cluster: job_submit.lua against the
grants file the daemon writes (docs/configuration.md, "Class grants file").

The session cluster's grants file starts with its test accounts' grants (devcluster TEST_GRANTS);
each test writes its own and the fixture puts the seed back.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import TEST_GRANTS
from tests.support.slurm import sl, tenant

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

RAILGANG = str(Path(sys.executable).with_name("railgang"))
QOS = "rg-serve"  # a QOS of the test's own, granted class 0


class Submitter:
    """sbatch with a class hint, as the user or root; every accepted job is cancelled after."""

    def __init__(self, cluster: DevCluster, workdir: Path) -> None:
        self.cluster, self.workdir, self.jobs = cluster, workdir, list[str]()

    def __call__(self, cls: int | None, *opts: str, account: str = "team-a",
                 user: str | None = None) -> subprocess.CompletedProcess[str]:
        hint = [] if cls is None else [f"--comment=rg:parallel=tp2;class={cls}"]
        res = sl(self.cluster, "sbatch", "--parsable", "--hold", f"--chdir={self.workdir}",
                 "--output=/dev/null", f"--account={account}", "--gres=gpu:2", *hint, *opts,
                 "--wrap=true", check=False, user=user)
        if res.returncode == 0:
            self.jobs.append(res.stdout.strip().split(";")[0])
        return res

    def fields(self, job: str) -> dict[str, str]:
        out = sl(self.cluster, "scontrol", "show", "job", "-o", job).stdout
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def accepted(self, res: subprocess.CompletedProcess[str]) -> dict[str, str]:
        assert res.returncode == 0, res.stderr
        return self.fields(self.jobs[-1])


@pytest.fixture
def submit(slurm_cluster: DevCluster, tmp_path: Path) -> Iterator[Submitter]:
    tmp_path.chmod(0o777)  # jobs of the plain user write here too
    sub = Submitter(slurm_cluster, tmp_path)
    yield sub
    for i in range(0, len(sub.jobs), 200):
        sl(slurm_cluster, "scancel", *sub.jobs[i:i + 200], check=False)
    slurm_cluster.spec.class_grants_file.write_text(TEST_GRANTS)


def grants(cluster: DevCluster, text: str) -> Path:
    path = cluster.spec.class_grants_file
    path.write_text(text)
    return path


def railgang(env: dict[str, str], *args: str) -> str:
    res = subprocess.run([RAILGANG, *args], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"railgang {' '.join(args)}: {res.stdout}{res.stderr}"
    return res.stdout + res.stderr


def test_refused_until_an_admin_grants_it(slurm_cluster: DevCluster, tmp_path: Path,
                                          submit: Submitter) -> None:
    """The whole path: `railgang quota grant` -> the daemon's cycle writes the file -> the lua."""
    spec = slurm_cluster.spec
    spec.class_grants_file.unlink()
    env = {**os.environ, **slurm_env(spec), "RAILGANG_CONFIG": "", "RAILGANG_HOME": str(tmp_path),
           "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'rg.sqlite'}",
           "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(spec.slurm_conf),
           "RAILGANG_DAEMON__HEARTBEAT_FILE": str(tmp_path / "heartbeat"),  # no leases here
           "RAILGANG_DAEMON__METRICS_PORT": "0",
           "RAILGANG_LEDGER__GRANTS_FILE": str(spec.class_grants_file)}
    railgang(env, "db", "upgrade")
    railgang(env, "daemon", "run", "--once")  # a fresh database: no grants
    assert "0 account" not in spec.class_grants_file.read_text()
    refused = submit(0, account="team-b")
    assert refused.returncode != 0
    assert ("railgang: --rg-class=0 (serving) is not granted to account team-b, user root; ask a "
            "railgang admin: `railgang quota grant 0 account team-b`") in refused.stderr

    for name, level, parent in (("railgang", "org", None), ("research", "dept", "railgang"),
                                ("team-b", "team", "research")):
        railgang(env, "quota", "add", name, "--level", level, *(["--parent", parent] if parent else []))
    assert "class 0 granted to account team-b" in railgang(env, "quota", "grant", "0", "account", "team-b")
    railgang(env, "daemon", "run", "--once")
    assert "0 account team-b" in spec.class_grants_file.read_text().splitlines()
    assert submit.accepted(submit(0, account="team-b"))["AdminComment"] == "railgang:tp=2,pp=1,dp=1;class=0"
    assert submit(1, account="team-b").returncode != 0  # class 0 is not class 1
    assert submit(0, account="team-a").returncode != 0  # nor another account's


def test_class_2_carries_its_short_limit(slurm_cluster: DevCluster, submit: Submitter) -> None:
    grants(slurm_cluster, "limit 2 600\n2 account team-a\n")
    res = submit(2)
    assert submit.accepted(res)["TimeLimit"] == "00:10:00"
    assert "--rg-class=2 (interactive) jobs end after 10 min" in res.stderr
    assert submit.accepted(submit(2, "--time=5"))["TimeLimit"] == "00:05:00"  # shorter is kept
    for too_long in ("--time=11", "--time=UNLIMITED"):
        res = submit(2, too_long)
        assert res.returncode != 0 and "allows at most --time=10 (minutes)" in res.stderr


def test_user_and_qos_grants(slurm_cluster: DevCluster, submit: Submitter) -> None:
    sl(slurm_cluster, "sacctmgr", "-i", "add", "qos", QOS, check=False)  # kept across sessions
    sl(slurm_cluster, "sacctmgr", "-i", "modify", "user", "root", "set", f"qos+={QOS}",
       check=False)
    grants(slurm_cluster, f"1 user root\n0 qos {QOS}\n")
    assert submit.accepted(submit(1, account="team-b"))["AdminComment"].endswith("class=1")
    assert submit(0, account="team-b").returncode != 0
    assert submit.accepted(submit(0, f"--qos={QOS}", account="team-b"))["QOS"] == QOS
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    # the report, as a new user would try it: a plain user's class 0 is refused
    user = tenant(slurm_cluster)  # not nobody: 26.05 refuses every job of uid 65534
    res = submit(1, user=user)
    assert res.returncode != 0 and f"not granted to account team-a, user {user}" in res.stderr
    grants(slurm_cluster, f"1 user root\n1 user {user}\n")
    assert submit.accepted(submit(1, user=user))["UserId"].startswith(f"{user}(")


def test_missing_or_garbled_file(slurm_cluster: DevCluster, submit: Submitter) -> None:
    """Fail closed for privilege, open for scheduling; a bad line is skipped and logged."""
    slurm_cluster.spec.class_grants_file.unlink()
    for cls in (0, 1, 2):
        res = submit(cls)
        assert res.returncode != 0 and "is missing or unreadable, so only class 3" in res.stderr
    assert submit.accepted(submit(3))["AdminComment"].endswith("class=3")
    assert "AdminComment" not in submit.accepted(submit(None))  # not an ML job: untouched
    grants(slurm_cluster, "0 account\nlimit 2 soon\n7 user x\n\x00\x01 garbage\n0 account team-a\n")
    assert submit.accepted(submit(0))["AdminComment"].endswith("class=0")
    assert submit(1).returncode != 0
    log = (slurm_cluster.spec.log / "slurmctld.log").read_text(errors="replace")
    assert "line 2 skipped (not `CLASS KIND SUBJECT`" in log and "limit 2 soon" in log


def big_grants(lines: int) -> str:
    """``lines`` grants of other teams and users, the test account's last (a worst case for a
    scan; the lua looks it up by key)."""
    rows = [f"{i % 3} {('account', 'user', 'qos')[i % 3]} subject-{i:05d}" for i in range(lines - 1)]
    return "# railgang class grants\nlimit 2 14400\n" + "\n".join([*rows, "0 account team-a"]) + "\n"


def test_submission_cost_with_1000_grants(slurm_cluster: DevCluster, submit: Submitter) -> None:
    """200 sbatch each: class 3 with no file (no grants read), class 0 with the 8-line seed
    file and with a 1,000-line one, in interleaved blocks so the machine's load drifts through
    all alike. The file is read on every submission, parsed only when its text changed (once
    per block here)."""
    conditions = (("none", None, 3), ("seed", TEST_GRANTS, 0), ("1000", big_grants(1000), 0))
    times: dict[str, list[float]] = {name: [] for name, _, _ in conditions}
    for block in range(8):
        for name, text, cls in conditions[:: 1 if block % 2 else -1]:
            if text is None:
                slurm_cluster.spec.class_grants_file.unlink(missing_ok=True)
            else:
                grants(slurm_cluster, text)
            for _ in range(25):
                t = time.perf_counter()
                res = submit(cls)
                times[name].append(time.perf_counter() - t)
                assert res.returncode == 0, res.stderr
    p50 = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    p90 = {k: statistics.quantiles(v, n=10)[-1] * 1e3 for k, v in times.items()}
    print(f"\nsbatch x{len(times['seed'])} each, p50 / p90 ms: " + ", ".join(
        f"{k} {p50[k]:.1f} / {p90[k]:.1f}" for k in times))
    # a parse per submission would show as most of a millisecond; sbatch's own noise is ~1 ms
    assert p50["1000"] < p50["none"] + 3 and p50["1000"] < p50["seed"] + 3


LUA_BENCH = """
slurm = {SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, INFINITE = 4294967295,
         log_user = function() end, log_info = function() end}
dofile(arg[1])
local n, rewrite = tonumber(arg[2]), arg[3] == "rewrite"
local f0 = io.open(os.getenv("RAILGANG_GRANTS_FILE")):read("*a")
local t = os.clock()
for i = 1, n do
    if rewrite then  -- a different text each time: the cache misses, every call parses
        local f = io.open(os.getenv("RAILGANG_GRANTS_FILE"), "w"); f:write(f0, "# ", i, "\\n"); f:close()
    end
    local job = {account = "team-a", user_name = "root", comment = "rg:class=0",
                 time_limit = slurm.NO_VAL}
    assert(slurm_job_submit(job, nil, 0) == 0 and job.admin_comment == "railgang:class=0")
end
print(string.format("%.1f", (os.clock() - t) / n * 1e6))
"""


def test_lua_cost_per_submission(tmp_path: Path) -> None:
    """The script alone (the real file, Slurm's table stubbed by plain values): microseconds
    per call with a 1,000-line file unchanged (read + compare) and rewritten each time (parse)."""
    lua = "/usr/bin/lua5.1"
    if not Path(lua).exists():
        pytest.skip("lua5.1 is not installed")
    script = Path(__file__).parents[2] / "slurm_plugins" / "job_submit.lua"
    (tmp_path / "bench.lua").write_text(LUA_BENCH)
    path = tmp_path / "grants"
    path.write_text(big_grants(1000))
    env = {**os.environ, "RAILGANG_GRANTS_FILE": str(path)}
    us = {}
    for mode, n in (("cached", 2000), ("rewrite", 200)):
        out = subprocess.run([lua, str(tmp_path / "bench.lua"), str(script), str(n), mode],
                             env=env, capture_output=True, text=True, timeout=120, check=True)
        us[mode] = float(out.stdout)
    print(f"\njob_submit.lua per call, 1,000-line grants: {us['cached']:.0f} us unchanged, "
          f"{us['rewrite']:.0f} us when the file changed (parse)")
    assert us["cached"] < us["rewrite"] / 3  # unchanged file: no parse
    assert us["cached"] < 1000
