"""railgang scheduler daemon: pure decision core (``railgang.daemon.core``) plus thin adapters."""

__version__ = "0.1.0"
