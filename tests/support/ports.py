"""Where this test session's services listen (RAILGANG_TEST_PORT_BASE, default 26817).

The session cluster's slurmctld, slurmdbd and MariaDB sit at BASE, BASE+2 and BASE-511, its
slurmds from BASE+83 on; the private PostgreSQL at BASE-1385 (25432 by default); a throw-away
mini cluster at BASE+1000; the site-like cluster's slurmctld, slurmdbd and MariaDB at BASE+900,
BASE+902 and BASE-300, its slurmds from BASE+911 on. Two test sessions at once (say, two checkouts) need two roots
(RAILGANG_TEST_ROOT) and two bases. All of it stays below the kernel's ephemeral range (32768).
"""

from __future__ import annotations

import os

PORT_BASE = int(os.environ.get("RAILGANG_TEST_PORT_BASE", "26817"))
POSTGRES_PORT = PORT_BASE - 1385
MINI_CLUSTER_PORT = PORT_BASE + 1000
