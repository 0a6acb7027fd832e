"""Scheduling policies, one file each; ``registry`` discovers every module's ``POLICY``."""
