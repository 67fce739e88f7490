"""Paths a sidecar trusts: only those this user made, never followed through a symlink.

- :func:`private_folder` makes the local sidecar's folder 0700 and refuses one of another
  owner or a wider mode: whoever can write in it can plant a socket or a symlink there.
- :func:`open_own_file` opens a log, lock or token file without following a symlink (a planted
  one would have its target truncated) and refuses anything but a regular file of this user's.
- :func:`socket_at` says whether a socket is at a path, and refuses a symlink (it may lead to
  another user's sidecar), another user's socket where only ours will do, or a folder, file or
  FIFO.

Each refusal is an :class:`~duckdb_sem.errors.UnsafePathError` that names the path and says
how to fix it.

Example:
    >>> import tempfile
    >>> socket_at(Path(tempfile.mkdtemp()) / "none.sock", own=True)
    False
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from duckdb_sem.errors import UnsafePathError

__all__ = ["open_own_file", "private_folder", "socket_at"]

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a socket")


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def private_folder(folder: Path) -> Path:
    """Make ``folder`` (mode 0700) if missing; refuse it unless it is this user's own folder,
    not a symlink, with no access for group or others."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # checked below, whatever it is
        folder.mkdir(mode=0o700)
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else _kind(st.st_mode)
        raise UnsafePathError(
            f"the local scheduler's folder {folder} is {what}, not a folder of your own; "
            f"remove it (rm {folder}), or set TMPDIR to a folder of your own"
        )
    if st.st_uid != os.getuid():
        raise UnsafePathError(
            f"the local scheduler's folder {folder} belongs to {_owner(st.st_uid)}, not to you "
            f"({_owner(os.getuid())}): its owner could plant a socket or a symlink in it. Have "
            "it removed (by its owner or root), or set TMPDIR to a folder of your own"
        )
    if st.st_mode & 0o077:
        raise UnsafePathError(
            f"the local scheduler's folder {folder} has mode {stat.S_IMODE(st.st_mode):04o}, "
            f"wider than 0700: other users could plant a socket or a symlink in it. Run "
            f"`chmod 700 {folder}` (or remove it: the next query makes it again)"
        )
    return folder


def open_own_file(path: Path, *, truncate: bool = False) -> int:
    """A descriptor of ``path`` opened for writing (appending unless ``truncate``), created
    0600 if missing, never through a symlink; refused unless it is a regular file of ours."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags if truncate else flags | os.O_APPEND, 0o600)
    except OSError as err:
        if os.path.islink(path):
            raise UnsafePathError(
                f"{path} is a symlink (to {os.readlink(path)}); duckdb-sem never writes "
                f"through one (its target would be overwritten). Remove it (rm {path})"
            ) from None
        if not os.path.isfile(path) and os.path.exists(path):  # a FIFO without a reader...
            raise UnsafePathError(
                f"{path} is {_kind(os.lstat(path).st_mode)}, not a file duckdb-sem made; "
                f"remove it (rm {path})"
            ) from err
        raise
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = f"is {_kind(st.st_mode)}"
    elif st.st_uid != os.getuid():
        problem = f"belongs to {_owner(st.st_uid)}, not to you"
    elif st.st_nlink > 1:
        problem = f"has {st.st_nlink} hard links (another name may be another user's file)"
    if problem is not None:
        os.close(fd)
        raise UnsafePathError(
            f"{path} {problem}: not a file duckdb-sem made; remove it (rm {path})"
        )
    os.set_blocking(fd, True)
    if truncate:
        os.ftruncate(fd, 0)
    return fd


def socket_at(path: Path, *, own: bool) -> bool:
    """Whether a unix socket is at ``path`` (False: nothing is). Refused: a symlink, anything
    but a socket, and with ``own`` a socket of another user."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(
            f"the sidecar socket path {path} is a symlink (to {os.readlink(path)}); a socket "
            "path is never followed (it could lead to another user's sidecar). Remove it "
            f"(rm {path})"
        )
    if not stat.S_ISSOCK(st.st_mode):
        raise UnsafePathError(
            f"the sidecar socket path {path} is {_kind(st.st_mode)}, not a duckdb-sem "
            f"sidecar's socket; remove it (rm -r {path}) or choose another path"
        )
    if own and st.st_uid != os.getuid():
        raise UnsafePathError(
            f"the sidecar socket {path} belongs to {_owner(st.st_uid)}, not to you: its sidecar "
            f"is another user's. Have it removed (by its owner or root); to share a sidecar "
            "with other users on purpose, give it a token (duckdb-sem serve --token)"
        )
    return True
