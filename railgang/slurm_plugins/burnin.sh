#!/bin/bash
# railgang's default burn-in (docs/failures.md): run by the daemon with sbatch on one node it
# drained as flaky; exit 0 and the node returns to service, anything else keeps it drained.
#
# 1. GPUs, where nvidia-smi exists: every GPU answers, none reports a volatile uncorrectable
#    ECC error, a pending or failed row remap, or an XID-worthy state (nvidia-smi -q fails on a
#    GPU that fell off the bus); the GPU count is at least RAILGANG_BURNIN_GPUS (default: the
#    GPUs Slurm gave the job, SLURM_GPUS_ON_NODE, when set).
# 2. CPU and memory: a fixed 64 MiB pseudo-random stream hashed twice must hash the same
#    (a bad core or DIMM flips bits; a deterministic digest would need the same coreutils).
# 3. Node-local filesystem: 64 MiB written to TMPDIR (or /tmp), fsync'd, read back, same digest,
#    removed.
set -u
fail() { echo "burn-in FAILED on $(hostname): $*" >&2; exit 1; }
say() { echo "burn-in $(hostname): $*"; }
MIB=64

if command -v nvidia-smi >/dev/null 2>&1; then
    xml=$(timeout 120 nvidia-smi -q -x) || fail "nvidia-smi -q -x exited $?"
    n=$(grep -c '<gpu id=' <<<"$xml")
    want=${RAILGANG_BURNIN_GPUS:-${SLURM_GPUS_ON_NODE:-0}}
    [ "$n" -ge "$want" ] || fail "$n GPUs answer, $want expected"
    # volatile uncorrectable ECC counters above 0
    if grep -Eq '<(dram|sram)_uncorrectable[a-z_]*>[1-9]' <<<"$xml"; then
        fail "volatile uncorrectable ECC errors"
    fi
    if grep -Eq '<remapped_row_(failure|pending)>Yes' <<<"$xml"; then
        fail "row remapping failed or pending (the GPU needs a reset)"
    fi
    if grep -Eq '<unrepairable_memory>Yes' <<<"$xml"; then
        fail "unrepairable memory"
    fi
    say "$n GPU(s) answer, no uncorrectable ECC, no pending row remap"
else
    say "no nvidia-smi: CPU and filesystem checks only"
fi

stream() { head -c $((MIB << 20)) < <(yes "railgang burn-in $1" ) ; }
a=$(stream seed | sha256sum) || fail "hashing failed"
b=$(stream seed | sha256sum) || fail "hashing failed"
[ "$a" = "$b" ] || fail "the same $MIB MiB hashed differently (CPU or memory)"
say "CPU/memory: $MIB MiB hashed twice, same digest"

dir=${TMPDIR:-/tmp}
f=$(mktemp "$dir/railgang-burnin.XXXXXX") || fail "cannot create a file in $dir"
trap 'rm -f "$f"' EXIT
stream disk > "$f" || fail "cannot write $MIB MiB to $dir"
sync "$f" 2>/dev/null || sync
c=$(sha256sum < "$f") || fail "cannot read back $f"
d=$(stream disk | sha256sum)
[ "$c" = "$d" ] || fail "$dir returned different bytes than were written"
say "filesystem: $MIB MiB written to $dir, read back intact"
say "passed"
