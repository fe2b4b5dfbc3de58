"""--compile best, without Ray: the flag, the matrix, the Choice a race makes, the host's kept answers, the parity
report and the table. The race itself runs in tests/integration/test_best.py and the README's first run."""

from __future__ import annotations

import time

import pytest

from raylab.cli.expand import parse_compile
from raylab.settings.resolve import expand_trials
from raylab.config import TrialSpec
from raylab.probes import race
from raylab.compare import parity
from raylab.compare import runs as compare
from raylab.errors import UserError
from raylab.registry import get_strategy
from raylab.timing import side_by_side

RACED = {
    "eager": {"step_ms": 1.0, "first_s": 0.01, "windows": 40},
    "inductor": {"step_ms": 1.5, "first_s": 20.0, "windows": 40},
}


def test_best_is_the_default_alone_and_a_trial_keeps_its_name_whatever_wins():
    assert parse_compile("best", "default") == ["best"]
    for values, modes in (("best,on", "default"), ("best", "max-autotune"), ("fast", "default")):
        with pytest.raises(UserError, match="--compile"):
            parse_compile(values, modes)
    specs = expand_trials(["torch:none", "jax:none"], [1], [])
    assert [s.best for s in specs] == [True, True] and [s.execution for s in specs] == [None, None]
    won = TrialSpec("torch", "none", 1, execution="inductor", best=True)
    assert won.name == "torch:none x1" and won.executes() == "inductor" and won.compiled()
    assert TrialSpec("torch", "none", 1, execution="inductor").name == "torch:none x1 inductor"


def test_each_kind_races_what_it_can_run_on_its_device():
    assert get_strategy("torch:none").candidates("cpu") == ["eager", "inductor"]
    assert get_strategy("torch:none").candidates("gpu") == ["eager", "inductor", "inductor:reduce-overhead"]
    assert get_strategy("tf:none").candidates("cpu") == ["tf.function", "xla"]
    assert get_strategy("tf:mirrored").candidates("cpu") == ["tf.function"]
    assert get_strategy("jax:none").candidates("cpu") == ["jit"]
    assert get_strategy("xla:single").candidates("cpu") == ["xla"]


def test_a_choice_ranks_the_candidates_and_each_kind_takes_the_fastest_it_can_run():
    choice = race.Choice(
        {
            "tf.function": {"step_ms": 3.0, "first_s": 2.0, "windows": 9},
            "xla": {"step_ms": 1.0, "first_s": 4.0, "windows": 9},
        },
        12.5,
        "raced",
    )
    assert choice.ranked() == ["xla", "tf.function"]
    assert choice.for_kind("tf:none", "cpu") == "xla"
    assert choice.for_kind("tf:mirrored", "cpu") == "tf.function"  # no XLA step in raylab's tf:mirrored
    assert choice.margin("xla") == pytest.approx(3.0)
    assert "execution_margin" not in choice.params("tf.function", ["tf.function"])  # it won against nothing
    params = choice.params("xla")
    assert params["execution_choice"] == "best" and params["execution_margin"] == 3.0 and params["race_s"] == 12.5
    assert params["execution_candidates"] == "tf.function 3 ms (first step 2.0 s); xla 1 ms (first step 4.0 s)"


def test_a_candidate_that_failed_is_named_with_its_error_and_the_other_runs():
    choice = race.Choice({"eager": RACED["eager"], "inductor": {"error": "Unsupported: graph break"}}, 3.0, "raced")
    assert choice.ranked() == ["eager"] and choice.for_kind("torch:none", "cpu") == "eager"
    assert choice.margin("eager") is None
    assert "inductor failed: Unsupported: graph break" in choice.described()
    everything_failed = race.Choice({"eager": {"error": "lost"}, "inductor": {"error": "lost"}}, 3.0, "raced")
    assert everything_failed.ranked() == [] and everything_failed.for_kind("torch:none", "cpu") == "eager"
    only = race.Choice({"jit": {}}, 0.0, "its only candidate")
    assert only.ranked() == ["jit"] and only.params("jit")["execution_candidates"] == "jit (its only candidate)"


def test_a_raced_answer_is_kept_on_this_host_and_read_back(tmp_path, monkeypatch):
    from raylab.probes import store

    monkeypatch.setattr(store, "PATH", tmp_path / "raylab" / "kept.json")
    assert race.read_cache("k1", "torch") is None
    race.write_cache("k1", "torch", race.Choice(RACED, 25.0, "raced"), "PyTorch, batch 32")
    race.write_cache("k2", "jax", race.Choice({"jit": {}}, 0.0, "raced"), "JAX, batch 32")
    kept = race.read_cache("k1", "torch")
    assert kept["value"]["candidates"] == RACED and race.read_cache("k2", "jax")["value"]["candidates"] == {"jit": {}}
    assert time.strftime("%Y-%m-%d") in kept["measured"] and kept["about"].startswith("PyTorch, batch 32: eager ")
    (tmp_path / "raylab" / "kept.json").write_text("{not json")
    assert race.read_cache("k1", "torch") is None  # a damaged file races again


def test_side_by_side_times_each_run_in_turns_and_ranks_the_slower_second():
    calls = {"fast": 0, "slow": 0}

    def stepper(label, pause):
        def run(k):
            calls[label] += k
            time.sleep(pause * k)

        return run, 0.0

    got = side_by_side(
        {"fast": stepper("fast", 0.0002), "slow": stepper("slow", 0.004)}, budget_s=0.3, rounds=2, block_s=0.05
    )
    assert set(got) == {"fast", "slow"} and got["slow"]["step_ms"] > got["fast"]["step_ms"]
    assert got["fast"]["windows"] >= 2 and got["slow"]["windows"] >= 2 and min(calls.values()) > 0


def rows(**per_trial) -> list[dict]:
    base = {"status": "FINISHED", "workers": 1, "execution_choice": "best"}
    return [{"trial": t, **base, **r} for t, r in per_trial.items()]


def test_best_against_best_is_fair_and_forced_eager_against_jit_is_not():
    fair = rows(
        **{
            "torch:none x1": {
                "framework": "torch",
                "execution": "eager",
                "compiled": "False",
                "execution_margin": "1.33",
                "execution_candidates": "eager 1 ms; inductor 1.3 ms",
                "optimizer_impl": "fused",
            },
            "jax:none x1": {"framework": "jax", "execution": "jit", "compiled": "True"},
        }
    )
    lines, mismatches = parity.parity(fair)
    assert mismatches == []
    assert any(
        "each framework's best" in line
        and "eager (eager 1 ms; inductor 1.3 ms): torch:none x1" in line
        and "jit (its only candidate): jax:none x1" in line
        for line in lines
    ), lines
    assert "    optimizer implementation: torch:none x1 fused" in lines
    forced = [{**r, "execution_choice": "forced"} for r in fair]
    assert "execution" in parity.parity(forced)[1]
    mixed = fair + rows(
        **{
            "torch:ddp x1": {
                "framework": "torch",
                "execution": "eager",
                "compiled": "False",
                "optimizer_impl": "per-tensor",
            }
        }
    )
    assert "optimizer implementation" in parity.parity(mixed)[1]


def test_the_table_says_what_won_and_by_how_much():
    assert (
        compare.shown_execution({"execution": "eager", "execution_choice": "best", "execution_margin": "1.329"})
        == "eager best 1.33x"
    )
    assert compare.shown_execution({"execution": "jit", "execution_choice": "best"}) == "jit best"
    assert compare.shown_execution({"execution": "inductor", "execution_choice": "forced"}) == "inductor"


def test_races_go_in_waves_the_cluster_holds_at_once():
    """Four keys of one CPU each on two CPUs: two waves of two (all four at once waited 30 minutes for CPUs the first
    two held); a GPU each on one GPU: one at a time; a key that fits nowhere gets a wave of its own."""
    cpu = {"CPU": 1.0}
    assert race.waves({k: cpu for k in "abcd"}, {"CPU": 2.0, "memory": 1e9}) == [["a", "b"], ["c", "d"]]
    gpu = {"CPU": 1.0, "GPU": 1.0}
    assert race.waves({"tf": gpu, "torch": gpu}, {"CPU": 16.0, "GPU": 1.0}) == [["tf"], ["torch"]]
    assert race.waves({"a": cpu, "big": {"CPU": 4.0}, "c": cpu}, {"CPU": 2.0}) == [["a"], ["big"], ["c"]]
    t4 = {"CPU": 1.0, "accelerator_type:T4": 0.001}
    assert race.waves({"x": t4, "y": cpu}, {"CPU": 2.0}) == [["x"], ["y"]]  # no T4 node: it waits alone
    assert race.waves({}, {"CPU": 2.0}) == []


def test_a_kind_trains_in_what_its_steps_spend_least_in_and_past_the_races_noise():
    """A 20 s compile for a 25% faster step: a short trial stays eager, a long one compiles; a lead inside the
    windows' spread is no lead; each candidate's projected seconds are recorded."""
    raced = {
        "eager": {"step_ms": 2.0, "first_s": 0.1, "windows": 40, "spread": 0.05},
        "inductor": {"step_ms": 1.5, "first_s": 20.0, "windows": 40, "spread": 0.03},
    }
    choice = race.Choice(raced, 25.0, "raced")
    assert choice.for_kind("torch:none", "cpu") == "inductor"  # a step alone: the faster step
    assert choice.for_kind("torch:none", "cpu", steps=600) == "eager"  # 1.3 s against 20.9
    assert choice.for_kind("torch:none", "cpu", steps=100_000) == "inductor"  # 200 s against 170: 1.18x > 1.05x
    noisy = race.Choice({**raced, "eager": {**raced["eager"], "spread": 0.25}}, 25.0, "raced")
    assert noisy.for_kind("torch:none", "cpu", steps=100_000) == "eager"  # 1.18x inside a 25% spread
    assert "execution_margin" not in noisy.params("eager", ["eager", "inductor"], 100_000)  # it won nothing
    assert choice.projected("inductor", 601) == pytest.approx(20.9)
    params = choice.params("eager", ["eager", "inductor"], 600)
    assert params["execution_margin"] == round(choice.projected("inductor", 600) / choice.projected("eager", 600), 3)
    assert params["execution_projected"] == (
        "600 steps: eager 1.3 s, inductor 20.9 s; a lead over the usual execution counts past 1.05x"
    )
    kept = race.Choice({"eager": RACED["eager"], "inductor": {"step_ms": 0.5, "first_s": 0.1}}, 0.0, "kept")
    assert kept.for_kind("torch:none", "cpu", steps=600) == "inductor"  # kept before spreads were: no noise known
