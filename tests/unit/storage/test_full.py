"""Which errors are the sweep directory refusing a write (sweeps.storage.full)."""

from __future__ import annotations

import errno

import pytest

from sweeps.storage.full import storage_refusal


def _chain(*errors: BaseException) -> BaseException:
    """errors[0] raised while handling errors[1], ... (each the next one's context)."""
    for outer, inner in zip(errors, errors[1:], strict=False):
        outer.__context__ = inner
    return errors[0]


@pytest.mark.parametrize(("error", "within", "expected"), [
    (OSError(errno.ENOSPC, "No space left on device", "/d/train/t1/x.pt"), "/d",
     ("ENOSPC", "/d/train/t1/x.pt")),
    (OSError(errno.ENOSPC, "No space left on device", "/tmp/mine.npy"), "/d", None),  # the loop's
    (OSError(errno.ENOSPC, "No space left on device"), "/d", ("ENOSPC", None)),
    (OSError(errno.EROFS, "Read-only file system", "/d/state/sweep.json"), "/d",
     ("EROFS", "/d/state/sweep.json")),
    (OSError(errno.EDQUOT, "Disk quota exceeded", "/d/x"), None, ("EDQUOT", "/d/x")),
    (OSError(errno.EACCES, "Permission denied"), "/d", None),  # names no sweep file
    (OSError(errno.EACCES, "Permission denied", "/d/x"), "/d", ("EACCES", "/d/x")),
    (OSError(errno.EACCES, "Permission denied", "/etc/shadow"), "/d", None),
    (OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on "
             "device"), "/d", ("ENOSPC", None)),
    (OSError(errno.ENOSPC, "No space left on device", "d/train/t1/x"), "/d",  # pyarrow's path
     ("ENOSPC", "d/train/t1/x")),
    (OSError(errno.ENOENT, "No such file", "/d/x"), "/d", None),
    (RuntimeError("unexpected pos"), "/d", None),
    (_chain(OSError(errno.ENOSPC, "No space left on device", "/d/state/end.json"),
            RuntimeError("x"), OSError(errno.ENOSPC, "No space left on device", "/d/a.csv")),
     "/d", ("ENOSPC", "/d/a.csv")),  # the first refused write, not one made while unwinding
])
def test_storage_refusal(error: BaseException, within: str | None,
                         expected: tuple[str, str | None] | None) -> None:
    found = storage_refusal(error, within=within)
    assert (None if found is None else (found.name, found.path)) == expected


def test_a_wrapped_cause_is_found_and_the_line_says_what_to_do() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise ValueError("the loop failed") from inner
    except ValueError as outer:
        found = storage_refusal(outer, within="/d")
    line = found.line("/d")
    assert line.startswith("could not write /d: No space left on device (errno 28, ENOSPC)")
    assert "run the same command again" in line and "\n" not in line
