"""The MLflow UI's comparison view of an invocation, saved as an experiment tag: its charts and the runs it shows."""

from __future__ import annotations

import json


# The MLflow UI's comparison view of the latest invocation: a saved view (experiment tag
# mlflow.sharedViewState.KEY) that the link in ui_hint opens. MLflow 3.17's UI opens an experiment on its GenAI
# overview unless the link says workflowType=machine_learning, nests child runs under a collapsed parent unless
# the runs are sorted by something other than start time, and orders charts alphabetically unless a view says.
VIEW = "raylab-latest"
VIEW_QUERY = f"workflowType=machine_learning&viewStateShareKey={VIEW}&compareRunsMode=CHART"
VIEW_CHARTS = [  # (chart type, metric, x axis: "step" = epoch, or a metric logged per epoch)
    ("BAR", "samples_per_sec", None),
    ("BAR", "step_time_p50_ms", None),
    ("LINE", "val_accuracy", "step"),
    ("LINE", "val_accuracy", "elapsed_s"),
    ("BAR", "time_to_target_s", None),
    ("LINE", "val_loss", "elapsed_s"),
    ("BAR", "startup_s", None),
]


def comparison_view(runs: str, time_ms: int) -> dict:
    """The view's state: its charts over the runs `runs` finds (an MLflow search filter), saved at time_ms."""
    section = "raylab-compare"
    charts = [_chart(i, kind, metric, x, section) for i, (kind, metric, x) in enumerate(VIEW_CHARTS)]
    state = {
        "searchFilter": runs,
        "orderByKey": "tags.`mlflow.runName`",
        "orderByAsc": True,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "compareRunCharts": charts,
        "compareRunSections": [
            {
                "uuid": section,
                "name": "raylab: the latest invocation",
                "display": True,
                "isReordered": True,
                "deleted": False,
            }
        ],
        "isAccordionReordered": True,
        "hideEmptyCharts": True,
        "runsHiddenMode": "SHOW_ALL",
    }
    return {
        "name": "raylab: the latest invocation",
        "createdAt": time_ms,
        "updatedAt": time_ms,
        "state": json.dumps(state),
    }


def _chart(i: int, kind: str, metric: str, x: str | None, section: str) -> dict:
    """One chart of the view: a bar of a metric, or a line of it by epoch ("step") or by another metric."""
    chart = {
        "uuid": f"raylab-{i}",
        "type": kind,
        "metricSectionId": section,
        "isGenerated": False,
        "deleted": False,
        "runsCountToCompare": 100,
        "metricKey": metric,
        "displayName": metric,
    }
    if kind == "LINE":
        chart.update(
            selectedMetricKeys=[metric],
            lineSmoothness=0,
            xAxisScaleType="linear",
            scaleType="linear",
            range={},
            xAxisKey="step" if x == "step" else "metric",
            selectedXAxisMetricKey="" if x == "step" else x,
            yAxisKey="metric",
            yAxisExpressions=[],
            ignoreOutliers=False,
            useGlobalXaxisKey=False,
            useGlobalLineSmoothing=True,
        )
    else:
        chart["dataAccessKey"] = metric
    return chart
