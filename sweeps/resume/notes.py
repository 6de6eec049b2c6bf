"""What a resumed sweep tells the user it recovered, after repairing its trials' checkpoints.

    line, repairs = resume_notes(prepared.layout, cfg.search.num_samples, ended_trials(sweep_dir))
    print(f"  {line} (start {record.starts})")       # and each repair as a warning

Each run directory under ``train/`` whose trial had not ended is repaired first
(``sweeps.resume.train_runs.repair_run``), so the epoch it continues after is the one Train will
really restore. ``unended_runs`` and ``continues_from`` only read (``sweeps status`` says with them
what a resume would continue, repairing nothing).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from sweeps import files
from sweeps.layout import SweepLayout
from sweeps.resume.train_runs import checkpoint_epochs, repair_run

# Up a layer on purpose (report_log): the report log a trial writes is where a loop's own
# checkpoint names meet the trial's epochs (as sweeps.report.status reads it).
from sweeps.trial.report_log import restored_clock

__all__ = ["resume_notes", "unended_runs", "continues_from"]


def resume_notes(layout: SweepLayout, num_samples: int,
                 ended: Collection[str]) -> tuple[str, list[str]]:
    """One line on what a resumed sweep recovered, and the checkpoint repairs it made
    (``ended``: ids of the trials that had ended).

    Example:
        >>> resume_notes(SweepLayout(Path(tempfile.mkdtemp())), 4, {"a1": {}})[0]
        'resuming: 1 of 4 trials had ended and are kept; 0 continue (none); 3 not started yet'
    """
    notes: list[str] = []
    continuing = []
    for run_dir in unended_runs(layout, ended):
        notes += repair_run(run_dir)
        continuing.append(continues_from(run_dir))
    line = (f"resuming: {len(ended)} of {num_samples} trials had ended and are kept; "
            f"{len(continuing)} continue ({', '.join(continuing) or 'none'}); "
            f"{max(0, num_samples - len(ended) - len(continuing))} not started yet")
    return line, notes


def unended_runs(layout: SweepLayout, ended: Collection[str]) -> list[Path]:
    """The run directories under ``train/`` of the trials not in ``ended``: those a resume
    continues (a name with a dot is a run moved aside, never continued). Reads only.

    Example:
        >>> unended_runs(SweepLayout(Path(tempfile.mkdtemp())), set())
        []
    """
    train = layout.train
    return [train / name for name in files.listdir(train)  # on disk or on an object store
            if "." not in name and name not in ended and files.is_dir(train / name)]


def continues_from(run_dir: Path) -> str:
    """``<trial id> after epoch E`` (the checkpoint Train restores: its newest valid
    ``TrialSession`` checkpoint, else the epoch the trial's report log has for the checkpoint
    a loop of its own saved) or ``<trial id> from epoch 1``. Reads only (``resume_notes``
    repairs the run first, so this is what Train restores).

    Example:
        >>> continues_from(Path(tempfile.mkdtemp()) / "a1b2")
        'a1b2 from epoch 1'
    """
    epochs = checkpoint_epochs(run_dir)
    clock = epochs[-1] if epochs else restored_clock(run_dir)
    return (f"{run_dir.name} after epoch {clock:g}" if clock else f"{run_dir.name} from epoch 1")
