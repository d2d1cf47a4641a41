"""Where an export writes: the target checked before the (long) work, and written whole or not at all.

:func:`check_file` and :func:`check_folder` refuse a target that cannot be written, with one message naming the
problem and the fix (:class:`~argus_lab.errors.ExportError`): a missing parent folder (never created on the quiet:
a typo would scatter folders), a parent that is a file, a file where a folder is asked or the other way round, a
folder that cannot be written.  :func:`written_file` and :func:`written_folder` hand out a temporary name beside
the target (``.<name>.argus-tmp-<pid>-<random>``) and rename it into place when the export is whole, so an export
that fails or is killed (``kill -9``) leaves nothing under the final name; the temporaries of exports whose
process is gone are removed by the next export to the same name (:func:`clear_stale`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from argus_lab.errors import ExportError

TMP_MARK = ".argus-tmp-"
"""The part of a temporary export's name that says whose it is: ``.<name>.argus-tmp-<pid>-<random>``."""
OLD_MARK = ".argus-old-"
"""A replaced Parquet folder, moved aside while the new one is renamed into place."""


def _shown(path: Path) -> str:
    from argus_lab.report.text import escape

    return repr(escape(str(path)))


def _check_parent(out: Path, example: str) -> None:
    parent = out.parent
    if parent.is_dir():
        if not os.access(parent, os.W_OK | os.X_OK):
            msg = (
                f"cannot write the export {_shown(out)}: the folder {_shown(parent)} is not writable (Permission "
                f"denied); choose a writable path, e.g. {example}"
            )
            raise ExportError(msg)
        return
    for up in [parent, *parent.parents]:  # the nearest part of the path that is there
        if up.exists() or up.is_symlink():
            if not up.is_dir():
                msg = (
                    f"cannot write the export {_shown(out)}: {_shown(up)} is a file, not a folder; choose a "
                    f"writable path in a folder, e.g. {example}"
                )
                raise ExportError(msg)
            break
    msg = (
        f"cannot write the export {_shown(out)}: the folder {_shown(parent)} does not exist; create it first "
        f"(mkdir -p {_shown(parent)}) or choose a path in a folder that exists, e.g. {example}"
    )
    raise ExportError(msg)


def check_file(out: Path, example: str) -> None:
    """Refuse ``out`` as the target of a one-file export (Perfetto, HTML) unless it can be written; ``example``: a
    target that would do (``~/report.html``), named in the message."""
    _check_parent(out, example)
    if out.is_dir():
        msg = (
            f"cannot write the export {_shown(out)}: it is a folder; name a file in it, e.g. "
            f"{_shown(out / Path(example).name)}"
        )
        raise ExportError(msg)
    if out.exists() and not os.access(out, os.W_OK):
        msg = f"cannot write the export {_shown(out)}: the file is read-only; choose another name, e.g. {example}"
        raise ExportError(msg)


def check_folder(out: Path, example: str) -> None:
    """Refuse ``out`` as the target of a Parquet export (a folder of ``*.parquet`` files) unless it can be written:
    an existing folder is replaced only when it holds nothing but Parquet files (an earlier export)."""
    _check_parent(out, example)
    if out.exists() and not out.is_dir():
        msg = (
            f"cannot write the export {_shown(out)}: it is a file, and a Parquet export writes a folder of files; "
            f"choose a new name (e.g. {example}) or remove the file"
        )
        raise ExportError(msg)
    if out.is_dir():
        other = sorted(p.name for p in out.iterdir() if not (p.is_file() and p.suffix == ".parquet"))
        if other:
            msg = (
                f"cannot write the export {_shown(out)}: the folder holds files other than Parquet files "
                f"({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}), which the export would replace; "
                f"choose a new or empty folder, e.g. {example}"
            )
            raise ExportError(msg)


def _beside(out: Path, mark: str) -> Path:
    """A name beside ``out`` that says whose it is: ``.<name><mark><pid>-<random>``."""
    return out.with_name(f".{out.name}{mark}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: there
    return True


def clear_stale(out: Path) -> list[Path]:
    """Remove what killed exports to ``out`` left beside it (their process is gone); returns what was removed."""
    removed = []
    with contextlib.suppress(OSError):
        for mark in (TMP_MARK, OLD_MARK):
            for p in out.parent.glob(f".{out.name}{mark}*"):
                pid = p.name[len(f".{out.name}{mark}") :].split("-", 1)[0]
                if not pid.isdigit() or _alive(int(pid)):
                    continue
                if mark == OLD_MARK and not out.exists():  # killed between the two renames: the old one is all
                    continue
                _remove(p)
                removed.append(p)
    return removed


def _remove(p: Path) -> None:
    with contextlib.suppress(OSError):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink()


@contextmanager
def written_file(out: Path) -> Iterator[Path]:
    """A temporary path beside ``out`` to write the export to; renamed to ``out`` when the block ends without an
    error, removed when it raises (an ``OSError`` while writing becomes an :class:`ExportError` with the fix)."""
    with _written(out, folder=False) as tmp:
        yield tmp


@contextmanager
def written_folder(out: Path) -> Iterator[Path]:
    """A temporary folder beside ``out`` to write a folder export to; renamed to ``out`` when the block ends
    without an error (an earlier export there moved aside first and then removed), removed when it raises."""
    with _written(out, folder=True) as tmp:
        yield tmp


@contextmanager
def _written(out: Path, *, folder: bool) -> Iterator[Path]:
    clear_stale(out)
    tmp = _beside(out, TMP_MARK)
    try:
        if folder:
            tmp.mkdir()
        yield tmp
        if folder and out.is_dir():  # a directory cannot be renamed over another: the old one goes aside first
            old = _beside(out, OLD_MARK)
            out.rename(old)
            tmp.rename(out)
            _remove(old)
        else:
            tmp.replace(out)
    except OSError as exc:
        _remove(tmp)
        raise ExportError(unwritable(out, exc)) from exc
    except BaseException:
        _remove(tmp)
        raise


def unwritable(out: Path, exc: OSError) -> str:
    """The message of an export that failed while writing: the cause, and the fix."""
    why = exc.strerror or str(exc)
    fix = (
        "free space on that disk or choose another one"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        else "choose a writable path, e.g. `argus-lab export --store S ~/report.html`"
    )
    return f"cannot write the export {_shown(out)} ({why}); {fix}"


__all__ = [
    "OLD_MARK",
    "TMP_MARK",
    "check_file",
    "check_folder",
    "clear_stale",
    "unwritable",
    "written_file",
    "written_folder",
]
