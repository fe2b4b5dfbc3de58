"""--profile on tf:none, torch:ddp x2 and xla:single: each trial's run holds its framework's trace and a
profile_summary.txt, and is tagged profiled; without --profile nothing is profiled."""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration

FASHION = load_recipe("fashion")

TRACES = {"tf:none x1": "profile/tf", "torch:ddp x2": "profile/torch_trace.json.gz", "xla:single x1": "profile/xla"}


def artifacts(client, run_id, path=""):
    out = []
    for a in client.list_artifacts(run_id, path):
        out += artifacts(client, run_id, a.path) if a.is_dir else [a.path]
    return out


def test_profile_logs_each_frameworks_trace_and_a_summary(run_recipe, capsys):
    code, summary, client = run_recipe(FASHION, "--quick", "--profile", "--trials", "tf:none,torch:ddp x2,xla:single",
                                       "--max-failures", "0")
    assert code == 0, summary
    out = capsys.readouterr().out
    for trial in summary["trials"]:
        name, run_id = trial["trial"], trial["run_id"]
        files = artifacts(client, run_id)
        assert any(f.startswith(TRACES[name]) for f in files), (name, files)
        text = client.download_artifacts(run_id, "profile/profile_summary.txt")
        summary_text = open(text).read()
        assert summary_text.startswith(f"raylab profile: {name}, rank 0, steps "), summary_text[:200]
        assert "top " in summary_text and "operations by self time" in summary_text
        tags = client.get_run(run_id).data.tags
        assert tags["profiled"].startswith("steps ") and "of rank 0" in tags["profiled"], tags["profiled"]
        assert f"[{name}] profiled steps" in out
    xla = next(t["run_id"] for t in summary["trials"] if t["trial"] == "xla:single x1")
    assert "profile/xla_metrics.txt" in artifacts(client, xla)
    ddp = next(t["run_id"] for t in summary["trials"] if t["trial"] == "torch:ddp x2")
    ddp_text = open(client.download_artifacts(ddp, "profile/profile_summary.txt")).read()
    assert "communication (all-reduce, broadcast, collectives):" in ddp_text
