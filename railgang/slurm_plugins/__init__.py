"""What runs inside Slurm (job_submit.lua, SPANK plugin) and the local test cluster bring-up."""
