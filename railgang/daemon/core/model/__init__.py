"""The core's values and their rules (snapshot, jobs, gangs, actions, reasons, …): plain, frozen."""
