"""Comparing an invocation's trials: the table, the parity report and the statistics (`raylab compare`, and the
end of every invocation). Reads MLflow through raylab/record/; imports no Ray.

`raylab.compare` was 0.1.0's path of the table module; its names are re-exported here so that path keeps working.
"""

from raylab.compare.runs import find_parent, trial_rows
from raylab.compare.table import compare, format_csv, format_report, format_table, write_chart

__all__ = ["compare", "find_parent", "format_csv", "format_report", "format_table", "trial_rows", "write_chart"]
