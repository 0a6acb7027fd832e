"""job_submit.lua against hostile input, under the real lua5.1 interpreter (Slurm's table
stubbed by plain values, as in test_needs_lua): what one user writes must never cost slurmctld
more than a bounded moment, never be tagged outside the daemon's ranges, and never move a lease
or a class it should not (issue 18 rows 1, 2, 5, 8, 12, 13; docs/security.md)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

LUA = "/usr/bin/lua5.1"
SCRIPT = Path(__file__).parents[2] / "slurm_plugins" / "job_submit.lua"
NO_VAL, INFINITE = 4294967294, 4294967295

# Reads one JSON-ish request per line from stdin ("submit" or "modify" with fields), prints one
# result line per request: "OK <admin_comment> <begin_time>" / "ERR <message>", plus the plugin's
# own CPU time for it, so a test can see a refusal that took a pathological path.
HARNESS = r"""
slurm = {SUCCESS = 0, ERROR = -1, ESLURM_ACCESS_DENIED = 2002, NO_VAL = 4294967294,
         INFINITE = 4294967295,
         log_user = function(fmt, msg) last = msg end, log_info = function(fmt, msg) last = msg end}
dofile(arg[1])
local function clean(s) return (string.gsub(s, "[\t\n\r]", " ")) end
local function unhex(h) if h == "-" then return nil end return (string.gsub(h, "..", function(x) return string.char(tonumber(x, 16)) end)) end
for line in io.lines() do
    last = nil
    local kind, uid, account, qos, comment, begin, priority, rec_comment, rec_account, tres_key, tres =
        string.match(line, "^(%a+) (%d+) (%S*) (%S*) (%S*) (%d+) (%d+) (%S*) (%S*) ?(%S*) ?(%S*)$")
    local t0 = os.clock()
    local rc, job
    if kind == "submit" then
        job = {account = account ~= "-" and account or nil, user_name = "alice",
               qos = qos ~= "-" and qos or nil, comment = unhex(comment),
               begin_time = tonumber(begin), time_limit = slurm.NO_VAL, min_nodes = 1}
        if tres_key ~= nil and tres_key ~= "" then job[tres_key] = unhex(tres) end
        rc = slurm_job_submit(job, nil, tonumber(uid))
    else
        job = {account = account ~= "-" and account or nil, qos = qos ~= "-" and qos or nil,
               begin_time = tonumber(begin), priority = tonumber(priority)}
        local rec = {job_id = 7, admin_comment = unhex(rec_comment), account = rec_account,
                     user_name = "alice", time_limit = 60}
        rc = slurm_job_modify(job, rec, nil, tonumber(uid))
    end
    local ms = (os.clock() - t0) * 1000
    if rc == slurm.SUCCESS then
        print(string.format("OK\t%s\t%s\t%.3f", clean(job.admin_comment or ""), tostring(job.begin_time), ms))
    else
        print(string.format("ERR\t%s\t-\t%.3f", clean(last or ""), ms))
    end
end
"""

GRANTS = "0 account serving\n1 qos prod\n"


def run_lua(tmp_path: Path, requests: list[str], *, heartbeat: bool = True,
            trusted: str | None = None) -> list[tuple[str, str, str, float]]:
    if not Path(LUA).exists():
        pytest.fail("lua5.1 is not installed (apt-get install lua5.1)")
    harness = tmp_path / "harness.lua"
    harness.write_text(HARNESS)
    (tmp_path / "grants").write_text(GRANTS)
    env = {"PATH": "/usr/bin:/bin", "RAILGANG_GRANTS_FILE": str(tmp_path / "grants")}
    if heartbeat:
        (tmp_path / "heartbeat").write_text(f"{int(time.time())} 120\n")
        env["RAILGANG_HEARTBEAT_FILE"] = str(tmp_path / "heartbeat")
    if trusted is not None:
        env["RAILGANG_TRUSTED_USERS"] = trusted
    out = subprocess.run([LUA, str(harness), str(SCRIPT)], input="".join(r + "\n" for r in requests),
                         capture_output=True, text=True, errors="replace", timeout=120, env=env,
                         check=True)
    rows = []
    for line in out.stdout.split("\n")[:-1]:  # not splitlines: \x1c, \x85 are in the data
        verdict, text, begin, ms = line.split("\t")
        rows.append((verdict, text, begin, float(ms)))
    assert len(rows) == len(requests), out.stderr
    return rows


def submit(comment: bytes | str, *, uid: int = 1000, account: str = "team-a", qos: str = "-",
           begin: int = 0, tres: tuple[str, str] | None = None) -> str:
    """``tres``: one GPU request of the job, e.g. ``("tres_per_node", "gres:gpu:8")``."""
    raw = comment.encode() if isinstance(comment, str) else comment
    gpus = f" {tres[0]} {tres[1].encode().hex()}" if tres else ""
    return f"submit {uid} {account} {qos} {raw.hex() or '-'} {begin} 0 - -{gpus}"


def modify(rec_comment: str, *, uid: int = 1000, account: str = "-", qos: str = "-", begin: int = 0,
           priority: int = NO_VAL, rec_account: str = "team-a") -> str:
    return f"modify {uid} {account} {qos} - {begin} {priority} {rec_comment.encode().hex()} {rec_account}"


# -- row 2: pattern cost is bounded --------------------------------------------------------------

@pytest.mark.parametrize("comment", [
    "rg:class=3;x=" + " " * 65536 + "y",           # `(.-)%s*$` was quadratic in the spaces
    "rg:parallel=" + "tp1," * 16384,                 # 64 KB of parallel items
    "rg:" + "a" * 65536,                            # one long key without '='
    "rg:needs=" + "g" * 65536 + "gb",               # `^(.-)gb$`
])
def test_a_64k_hint_comment_is_refused_before_any_pattern_runs(tmp_path: Path, comment: str) -> None:
    [(verdict, message, _, ms)] = run_lua(tmp_path, [submit(comment)])
    assert verdict == "ERR" and "at most 512 characters" in message, message
    assert ms < 50, f"{ms:.1f} ms of lua for one refusal"  # a guard against a hang, not a benchmark


def test_long_plain_comments_are_not_railgang_business(tmp_path: Path) -> None:
    [(verdict, tag, _, _)] = run_lua(tmp_path, [submit("x" * 65536)])
    assert (verdict, tag) == ("OK", "")


@pytest.mark.parametrize("hint", ["parallel=" + "tp8," * 70, "needs=nvlink" + ",nvlink" * 60])
def test_each_hint_value_is_bounded(tmp_path: Path, hint: str) -> None:
    [(verdict, message, _, _)] = run_lua(tmp_path, [submit("rg:" + hint)])
    assert verdict == "ERR" and "characters" in message


# -- row 13: numbers stay inside the daemon's ranges ---------------------------------------------

@pytest.mark.parametrize(("hint", "want"), [
    ("elastic=1:99999999999999999999", "ERR"),
    ("elastic=65536:65537", "ERR"),
    ("elastic=0:4", "ERR"),
    ("elastic=1:65536", "OK"),
    ("parallel=tp99999999999999999999", "ERR"),
    ("parallel=tp65537", "ERR"),
    ("parallel=tp8,dp65536", "OK"),  # with a GPU request of 524,288 (below)
    ("class=nan", "ERR"), ("class=inf", "ERR"), ("class=0x3", "ERR"), ("class=3.0", "ERR"),
    ("class=1e0", "ERR"), ("class=-0", "ERR"), ("class= 3 ", "OK"),
])
def test_numbers_outside_the_daemons_ranges_are_refused(tmp_path: Path, hint: str, want: str) -> None:
    [(verdict, text, _, _)] = run_lua(tmp_path, [submit("rg:" + hint,
                                                        tres=("tres_per_job", "gres:gpu:524288"))])
    assert verdict == want, text
    if verdict == "OK":
        assert "-" not in text.split("class=")[0]  # no negative number rendered into the tag


# texts a hostile user can write: binary, NUL, invalid UTF-8, the grammar's own separators
hostile = st.binary(max_size=600).map(lambda b: b"rg:" + b) | st.text(
    st.sampled_from(list("rg:;=,.parallelasticneedsclasstdp0123456789 \t\x00\xff")), max_size=600
).map(lambda t: t.encode("utf-8", "surrogatepass"))


@settings(max_examples=30, deadline=None)
@given(st.lists(hostile, min_size=20, max_size=20))
def test_any_comment_gets_an_answer_and_a_tag_the_daemon_reads(tmp_path_factory: pytest.TempPathFactory,
                                                               comments: list[bytes]) -> None:
    from railgang.daemon.slurm.cli.parse import parse_tag

    rows = run_lua(tmp_path_factory.mktemp("lua"), [submit(c.replace(b"\n", b" ")) for c in comments])
    for verdict, text, _, _ in rows:
        if verdict == "OK" and text:
            assert parse_tag(text) is not None  # never a tag the daemon would skip


GPUS2 = ("tres_per_node", "gres:gpu:2")


# -- row 8: the user's --begin -------------------------------------------------------------------

def test_a_later_begin_is_kept_in_the_tag_and_in_slurms_begin_time(tmp_path: Path) -> None:
    later = int(time.time()) + 86400
    [(verdict, tag, begin, _)] = run_lua(tmp_path, [submit("rg:parallel=tp2", begin=later, tres=GPUS2)])
    assert verdict == "OK" and f"begin={later}" in tag and int(begin) == later


def test_no_begin_gets_the_lease_and_no_begin_in_the_tag(tmp_path: Path) -> None:
    [(verdict, tag, begin, _)] = run_lua(tmp_path, [submit("rg:parallel=tp2", tres=GPUS2)])
    assert verdict == "OK" and "begin=" not in tag
    assert abs(int(begin) - (time.time() + 120)) < 5


# -- rows 1 and 12: who may move a lease ---------------------------------------------------------

TAG = "railgang:tp=2,pp=1,dp=1;class=3"


def test_only_trusted_uids_move_the_lease_or_set_a_priority(tmp_path: Path) -> None:
    now = int(time.time())
    rows = run_lua(tmp_path, [
        modify(TAG, uid=1000, begin=now),                  # the owner: StartTime=now
        modify(TAG, uid=1000, priority=100000),            # the owner: a priority
        modify(TAG, uid=1000, priority=INFINITE),          # the owner: scontrol release
        modify(TAG, uid=1000, priority=0),                 # the owner: scontrol hold
        modify(TAG, uid=4242, begin=now),                  # the daemon's user (trusted by uid)
        modify(TAG, uid=4242, priority=100000),
        modify(TAG, uid=0, begin=now),                     # root
        modify("plain comment", uid=1000, begin=now),      # not a railgang job
    ], trusted="4242")
    assert [r[0] for r in rows] == ["ERR", "ERR", "OK", "OK", "OK", "OK", "OK", "OK"]


def test_trusted_users_by_name_come_from_etc_passwd(tmp_path: Path) -> None:
    import pwd

    name = pwd.getpwuid(os.getuid()).pw_name if os.getuid() != 0 else "daemon"
    uid = pwd.getpwnam(name).pw_uid
    rows = run_lua(tmp_path, [modify(TAG, uid=uid, begin=int(time.time()))], trusted=f"nobody-here,{name}")
    assert rows[0][0] == "OK"
    rows = run_lua(tmp_path, [modify(TAG, uid=uid, begin=int(time.time()))], trusted="nobody-here")
    assert rows[0][0] == "ERR"


def test_without_a_live_daemon_the_owner_may_move_the_begin_time(tmp_path: Path) -> None:
    rows = run_lua(tmp_path, [modify(TAG, uid=1000, begin=int(time.time()))], heartbeat=False)
    assert rows[0][0] == "OK"


# -- row 5: a class follows its grant ------------------------------------------------------------

def test_moving_a_class0_job_to_an_ungranted_account_or_qos_is_refused(tmp_path: Path) -> None:
    serving = "railgang:tp=2,pp=1,dp=1;class=0"
    prod = "railgang:class=1"
    rows = run_lua(tmp_path, [
        modify(serving, account="team-a", rec_account="serving"),   # off the granted account
        modify(serving, account="serving", rec_account="serving"),  # the same account
        modify(serving, qos="normal", rec_account="serving", uid=0),  # root too: the grant decides
        modify(prod, qos="normal", rec_account="team-a"),           # off the granted QOS
        modify(prod, qos="prod", rec_account="team-a"),             # onto it
        modify(TAG, account="team-b"),                              # class 3 moves freely
    ])
    assert [r[0] for r in rows] == ["ERR", "OK", "OK", "ERR", "OK", "OK"]


# -- issue 38 row 8: a shape needs a GPU request behind it; GPU requests are length-bounded ------

@pytest.mark.parametrize("hint", ["parallel=tp65536,pp65536,dp65536", "parallel=tp2",
                                  "elastic=1:4", "class=1;parallel=tp8,dp2;elastic=1:2"])
def test_a_shape_without_a_gpu_request_is_refused(tmp_path: Path, hint: str) -> None:
    [(verdict, message, _, _)] = run_lua(tmp_path, [submit("rg:" + hint)])
    assert verdict == "ERR" and "asks for" in message and "--gpus=" in message, message


@pytest.mark.parametrize("tres", [("tres_per_node", "gres:gpu:2"), ("tres_per_job", "gres/gpu:2"),
                                  ("tres_per_task", "gres:gpu:1"),
                                  ("tres_per_socket", "gres:gpu:1")])
def test_any_gpu_request_lets_a_shape_through(tmp_path: Path, tres: tuple[str, str]) -> None:
    [(verdict, tag, _, _)] = run_lua(tmp_path, [submit("rg:parallel=tp2;class=3", tres=tres)])
    assert (verdict, tag) == ("OK", "railgang:tp=2,pp=1,dp=1;class=3")


def test_a_class_hint_alone_needs_no_gpu_request(tmp_path: Path) -> None:
    [(verdict, tag, _, _)] = run_lua(tmp_path, [submit("rg:class=3")])
    assert (verdict, tag) == ("OK", "railgang:class=3")  # the daemon's business, as before


@pytest.mark.parametrize("key", ["tres_per_job", "tres_per_node", "tres_per_task",
                                 "tres_per_socket"])
@pytest.mark.parametrize("value", ["gpu:" + "1" * 65536 + "x", "gpu:a" + "gpu:" * 16384,
                                   "gres:gpu:" + "a" * 65536 + ":8"])
def test_a_64k_gpu_request_is_refused_before_any_pattern_runs(tmp_path: Path, key: str,
                                                              value: str) -> None:
    [(verdict, message, _, ms)] = run_lua(tmp_path, [submit("rg:parallel=tp8;needs=nvlink",
                                                            tres=(key, value))])
    assert verdict == "ERR" and "at most 1024 characters" in message and key in message, message
    assert ms < 50, f"{ms:.1f} ms of lua for one refusal"
