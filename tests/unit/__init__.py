"""The unit tier: no Ray cluster, real files, real stores, real frameworks in one process."""

# every unit file together (tests/tiers.py reports them as one row), measured 118 s on the 2-core VM (2026-12-06)
SECONDS = 160
