"""Serving deployments beside training: the demand they need, its forecast, and the GPUs the
serving pool can lend to preemptible training until the forecast says it needs them back
(issue 19; the source chapter's training-serving boundary)."""
