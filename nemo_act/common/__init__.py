"""What every floor uses.

The package's own files (``paths``), importing what a config names (``plugins``), quiet library logs (``quiet``),
seeds (``seeding``), write errors as one line (``write_errors``), the one-writer lock (``runlock``).
"""
