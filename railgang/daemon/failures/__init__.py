"""Failures as a scheduling problem (issue 20): calibrated failure rates, checkpoint advice."""
