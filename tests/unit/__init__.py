"""The unit tier: no Ray cluster, real files, real stores, real frameworks in one process."""

SECONDS = 230  # every unit file together (tests/tiers.py reports them as one row), measured on the 2-core machine
