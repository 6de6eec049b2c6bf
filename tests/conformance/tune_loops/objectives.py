"""Ray Tune function trainables written as Tune's docs write them (``tune.report``,
``tune.get_checkpoint``, ``tune.Checkpoint``), noting what each observes
(``tests.conformance.tune_loops.noted``): the conformance corpus of Tune's function API.

    objective(config)         # reports config["steps"] times, then returns
    checkpointing(config)     # resumes from tune.get_checkpoint(); raises once at fail_at
    endless(config)           # reports until Tune stops it (stop / scheduler.max_t)
    returns(config)           # Tune's old style: returns its final metrics
    pbt(config)               # Tune's PBT example: the loop's own checkpoint carries its state
"""

import json
import os
import tempfile
import time

from ray import tune

from tests.conformance.tune_loops.noted import note, stand_still


def _context(config):
    context = tune.get_context()
    note(config, "context", trial_id=bool(context.get_trial_id()),
         trial_name=bool(context.get_trial_name()),
         trial_dir=os.path.isdir(context.get_trial_dir()),
         keys=sorted(k for k in config if k != "observe_dir"))


def objective(config):
    _context(config)
    for step in range(config["steps"]):
        loss = (config["lr"] - 0.01) ** 2 + 1.0 / (step + 1)
        tune.report({"iterations": step, "mean_loss": loss})
        note(config, "report", step=step, mean_loss=round(loss, 6))
    note(config, "ended")


def checkpointing(config):
    _context(config)
    start = 0
    checkpoint = tune.get_checkpoint()
    note(config, "start", checkpoint=type(checkpoint).__name__ if checkpoint else None)
    if checkpoint:
        with checkpoint.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                state = json.load(f)
        note(config, "restored", step=state["step"])
        start = state["step"] + 1
    for step in range(start, config["steps"]):
        if step == config.get("fail_at") and not os.path.exists(
                os.path.join(config["observe_dir"], "failed")):
            open(os.path.join(config["observe_dir"], "failed"), "w").close()
            raise RuntimeError(f"Failing on iter={step}!!")
        loss = (config["lr"] - 0.01) ** 2 + 1.0 / (step + 1)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            tune.report({"iterations": step, "mean_loss": loss},
                        checkpoint=tune.Checkpoint.from_directory(d))
        note(config, "report", step=step, mean_loss=round(loss, 6))
        stand_still(config, step)
    note(config, "ended")


def endless(config):
    _context(config)
    step = 0
    while True:
        tune.report({"iterations": step, "mean_loss": 1.0 / (step + 1)})
        note(config, "report", step=step)
        step += 1
        time.sleep(0.01)


def returns(config):
    _context(config)
    return {"mean_loss": (config["lr"] - 0.01) ** 2}


def pbt(config):
    """Tune's PBT function example: the state, with the lr and the trial that wrote it, in
    the loop's own checkpoint; PBT hands an exploited trial its donor's."""
    me = tune.get_context().get_trial_id()
    step, accuracy = 1, 0.0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                state = json.load(f)
        note(config, "restored", trial=me, writer=state["trial"], step=state["step"])
        step, accuracy = state["step"] + 1, state["accuracy"]
    while step <= config["steps"]:
        accuracy += config["lr"]
        time.sleep(0.3)  # trials report alternately: PBT has a population to rank
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step, "accuracy": accuracy, "trial": me}, f)
            tune.report({"mean_accuracy": accuracy, "iterations": step},
                        checkpoint=tune.Checkpoint.from_directory(d))
        step += 1
