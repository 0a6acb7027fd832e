"""The daemon process around the pure core: the action journal and its reconciliation with
Slurm, one leader, the interval scheduler, heartbeat and leases, metrics, structured logs, and
what ``railgang daemon status`` and ``railgang explain`` read. See docs/daemon.md."""
