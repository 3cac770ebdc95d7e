"""The simulator's one state writer: every file simhost rewrites (its state JSON, the tree's attribute files, the
kit's installed files) is written whole to a temp file and renamed over the target, so that a reader (a simulated
tool, the kernelfs watcher, a sync daemon) sees the old content or the new one, never a partial write.

The temp file is ``.<name>.<pid>.tmp``: unique per process, in the target's directory (the same filesystem, so
the rename is atomic) or in the caller's ``tmp_dir`` (netdev.py keeps temp files out of the directories that
readers list, such as ``gids/``). The caller's text is written as given: callers add the trailing newline their
file format has. Standard library only (runs in the containers)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def temp_path(path: Path, tmp_dir: Path | None = None) -> Path:
    """Where ``path`` is written before the rename: ``.<name>.<pid>.tmp`` beside it, or in ``tmp_dir``."""
    return Path(tmp_dir if tmp_dir is not None else path.parent) / f".{path.name}.{os.getpid()}.tmp"


def write_text(path: Path, text: str, *, mode: int | None = None, tmp_dir: Path | None = None,
               mkdir: bool = False) -> None:
    """Replace ``path`` with ``text`` (UTF-8) at once. ``mode``: the file's permission bits (else the process's
    default for a new file); ``mkdir``: make the parent directories first."""
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path, tmp_dir)
    try:
        # created with ``mode`` (no wider while the text goes in), then set exactly: the umask does not apply
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                     0o666 if mode is None else mode)
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode("utf-8"))
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: Path, data, *, indent: int, sort_keys: bool = False, mkdir: bool = False) -> None:
    """Replace ``path`` with ``data`` as JSON (``indent``, ``sort_keys`` as the file has them) and a newline."""
    write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n", mkdir=mkdir)


def write_if_changed(path: Path, text: str, *, mode: int | None = None, mkdir: bool = False) -> bool:
    """Write ``text`` unless ``path`` is a regular file (not a symlink) that holds exactly it; with ``mode``, an
    unchanged file whose mode differs only gets its mode set. True when the file or its mode changed."""
    path = Path(path)
    if path.is_file() and not path.is_symlink() and path.read_bytes() == text.encode("utf-8"):
        if mode is None or (path.stat().st_mode & 0o7777) == mode:
            return False
        path.chmod(mode)
        return True
    write_text(path, text, mode=mode, mkdir=mkdir)
    return True
