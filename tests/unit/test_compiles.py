"""raylab/loop/compiles.py: compilations counted apart (warm-up, evaluation, after the warm-up), as every compiling
framework records them."""

from __future__ import annotations

from raylab.loop.compiles import CompileWatch


class Counter:
    def __init__(self, count=0, seconds=0.0):
        self.count, self.seconds = count, seconds

    def compile(self, seconds: float) -> None:
        self.count, self.seconds = self.count + 1, self.seconds + seconds

    def snapshot(self):
        return self.count, self.seconds


def test_warmup_evaluation_and_late_compilations_apart_from_what_the_process_compiled_before():
    c = Counter(3, 9.0)  # a process that compiled before this trial (a warm worker's earlier trial)
    watch = CompileWatch(c.snapshot, warmup_steps=2)
    c.compile(5.0)
    watch.after_step()
    watch.after_step()  # the warm-up ends: one compilation, 5 s

    def evaluate():
        c.compile(1.0)
        return "evaluated"

    assert watch.apart(evaluate)() == "evaluated"
    watch.after_step()
    c.compile(0.5)  # a training step compiles again after the warm-up
    watch.after_step()
    assert watch.figures() == {
        "compile_count_warmup": 1,
        "compile_time_warmup_s": 5.0,
        "compiles_after_warmup": 1,
        "compile_time_after_warmup_s": 0.5,
        "compile_count_eval": 1,
        "compile_time_eval_s": 1.0,
    }
    assert watch.late_steps == [4]


def test_a_trial_shorter_than_its_warmup_counts_every_compilation_as_warmup():
    c = Counter()
    watch = CompileWatch(c.snapshot, warmup_steps=10)
    c.compile(2.0)
    watch.after_step()
    assert watch.figures()["compile_count_warmup"] == 1 and watch.figures()["compiles_after_warmup"] == 0
