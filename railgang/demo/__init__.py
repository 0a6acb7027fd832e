"""The demo workload: a runnable example training job and a mixed stream of hinted jobs."""
