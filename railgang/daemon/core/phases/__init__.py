"""The cycle's phases (draft, place, size, evict, reclaim, migrate, upgrade, pool_place)."""
