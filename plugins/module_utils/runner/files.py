# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way a module writes a file on the host (a systemd unit, a modules-load.d file, the health program).

Pure Python (no Ansible imports), computed first and written behind the module's one check-mode gate:
- ``plan(files, shown, removed)``: the files (``{path: (text, mode)}``) whose content or mode differs from what is on
  disk, and the diff (whole text for the files in ``shown``, one line for the others and for each file ``removed``);
  a second run with the same files plans nothing;
- ``prepare(changes)``: every directory made and checked writable before any file is written (nothing half-applied);
- ``write(changes, removed)``: each file written atomically (a temporary file in the same directory, its mode set,
  renamed over the old one: a reader, or a boot, sees the old file or the new one, never a part).
A role writes its files with ``ansible.builtin.template``; a module never calls ``atomic_move`` or opens a file for
writing itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile


def current(path):
    """The text of ``path``, or None when it is not there (or cannot be read)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def mode_of(path):
    """The permission bits of ``path``, or None."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return None


def plan(files, shown=(), removed=()):
    """([(path, text, mode)] of the files whose content or mode differs from what is on disk, {before, after}):
    the whole text of the files in ``shown``, one line per other file and per file ``removed``."""
    out, before, after = [], [], []
    for path in removed:
        before.append("%s: present\n" % path)
        after.append("%s: absent\n" % path)
    for path in sorted(files):
        text, mode = files[path]
        now = current(path)
        if now != text or mode_of(path) != mode:
            out.append((path, text, mode))
            if path in shown:
                before.append("# %s\n%s" % (path, now or ""))
                after.append("# %s (mode %04o)\n%s" % (path, mode, text))
            else:
                before.append("%s: %s\n" % (path, "absent" if now is None else "%d bytes, mode %04o" % (
                    len(now), mode_of(path) or 0)))
                after.append("%s: %d bytes, mode %04o\n" % (path, len(text), mode))
    return out, {"before": "".join(before), "after": "".join(after)}


def prepare(changes):
    """Make every directory the files go to, and check each can be written, before any file is (OSError)."""
    for directory in sorted(set(os.path.dirname(path) for path, _text, _mode in changes)):
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        if not os.access(directory, os.W_OK):
            raise OSError(13, "Permission denied", directory)


def write(changes, removed=()):
    """Remove ``removed``, write each change atomically (a temporary file renamed), after ``prepare``."""
    for path in removed:
        os.unlink(path)
    for path, text, mode in changes:
        fd, tmp = tempfile.mkstemp(prefix=".hpcnet.", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.chmod(tmp, mode)
            os.rename(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def write_text(path, text, mode=0o644):
    """One file written atomically (its directory made): what a module that plans its own diff calls to apply."""
    changes = [(path, text, mode)]
    prepare(changes)
    write(changes)


def apply(files, check_mode, shown=(), removed=()):
    """plan, then (unless ``check_mode``) prepare and write: ``(changed, diff)``."""
    changes, diff = plan(files, shown, removed)
    if (changes or removed) and not check_mode:
        prepare(changes)
        write(changes, removed)
    return bool(changes or removed), diff
