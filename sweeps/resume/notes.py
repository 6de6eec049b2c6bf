"""What a resumed sweep tells the user it recovered, after repairing its trials' checkpoints.

    line, repairs = resume_notes(prepared.layout, cfg.search.num_samples, ended_trials(sweep_dir))
    print(f"  {line} (start {record.starts})")       # and each repair as a warning

Each run directory under ``train/`` whose trial had not ended is repaired first
(``sweeps.resume.train_runs.repair_run``), so the epoch it continues after is the one Train will
really restore.
"""

from __future__ import annotations

from collections.abc import Collection

from sweeps.layout import SweepLayout

__all__ = ["resume_notes"]


def resume_notes(layout: SweepLayout, num_samples: int,
                 ended: Collection[str]) -> tuple[str, list[str]]:
    """One line on what a resumed sweep recovered, and the checkpoint repairs it made
    (``ended``: ids of the trials that had ended).

    Example:
        >>> resume_notes(SweepLayout(Path(tempfile.mkdtemp())), 4, {"a1": {}})[0]
        'resuming: 1 of 4 trials had ended and are kept; 0 continue (none); 3 not started yet'
    """
    from sweeps import files
    from sweeps.resume.train_runs import checkpoint_epochs, repair_run

    notes: list[str] = []
    continuing = []
    train = layout.train
    for name in files.listdir(train):  # on disk or on an object store
        run_dir = train / name
        if "." in name or name in ended or not files.is_dir(run_dir):
            continue
        notes += repair_run(run_dir)
        epochs = checkpoint_epochs(run_dir)
        continuing.append(f"{run_dir.name} after epoch {epochs[-1]}" if epochs
                          else f"{run_dir.name} from epoch 1")
    left = max(0, num_samples - len(ended) - len(continuing))
    line = (f"resuming: {len(ended)} of {num_samples} trials had ended and are kept; "
            f"{len(continuing)} continue ({', '.join(continuing) or 'none'}); "
            f"{left} not started yet")
    return line, notes
