"""Recording trials: MLflow through one Tracker (tracking.py), the tracking URI checked at the door (uri.py), the
per-trial sink actor the workers report to (sink.py), the params every child run shares (params.py), what code ran
(provenance.py) and what a finished trial records (figures.py)."""
