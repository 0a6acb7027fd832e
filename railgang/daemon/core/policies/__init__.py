"""Scheduling policies, one file each; ``railgang.daemon.core.policy`` discovers every module's ``POLICY``."""
