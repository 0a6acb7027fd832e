"""Scheduling policies, one file each; ``daemon.core.policy`` discovers every module's ``POLICY``."""
