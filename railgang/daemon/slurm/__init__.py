"""The real Slurm backends behind the one backend seam (``backend.Backend``): the command-line
backend (``cli``) and the in-memory test double (``fake.FakeBackend``). The simulated cluster is
the simulator's own (``railgang.daemon.sim.backend``); nothing here imports ``daemon/sim``."""
