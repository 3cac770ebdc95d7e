# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runner.files: the one way a module writes a boot-time file (a unit, a modules-load.d file, the health program):
planned with its diff, written atomically behind the check-mode gate, nothing on a second run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import files

REPO = Path(__file__).resolve().parents[5]
UNIT = "[Unit]\nDescription=re-apply\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n"


def test_a_new_file_is_planned_written_and_then_left_alone(tmp_path):
    path = str(tmp_path / "etc" / "systemd" / "system" / "hpcnet-x.service")
    changed, diff = files.apply({path: (UNIT, 0o644)}, check_mode=False, shown=(path,))
    assert changed
    assert diff == {"before": "# %s\n" % path, "after": "# %s (mode 0644)\n%s" % (path, UNIT)}
    assert Path(path).read_text() == UNIT and os.stat(path).st_mode & 0o7777 == 0o644
    assert files.apply({path: (UNIT, 0o644)}, check_mode=False) == (False, {"before": "", "after": ""})
    assert sorted(os.listdir(os.path.dirname(path))) == ["hpcnet-x.service"]  # no temporary file left


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path):
    path = str(tmp_path / "hpcnet-x.service")
    Path(path).write_text("old\n")
    os.chmod(path, 0o600)
    changed, diff = files.apply({path: (UNIT, 0o644)}, check_mode=True)
    assert changed
    assert diff == {"before": "%s: 4 bytes, mode 0600\n" % path, "after": "%s: %d bytes, mode 0644\n" % (path, len(UNIT))}
    assert Path(path).read_text() == "old\n"


def test_a_mode_alone_is_a_change(tmp_path):
    path = str(tmp_path / "f.conf")
    files.write_text(path, "x\n", 0o600)
    assert files.plan({path: ("x\n", 0o644)})[0] == [(path, "x\n", 0o644)]


def test_removed_files_go_and_are_in_the_diff(tmp_path):
    path = tmp_path / "stale.timer"
    path.write_text("x")
    changed, diff = files.apply({}, check_mode=False, removed=[str(path)])
    assert changed and not path.exists()
    assert diff == {"before": "%s: present\n" % path, "after": "%s: absent\n" % path}


def test_the_replace_is_atomic(tmp_path, monkeypatch):
    """The new text goes to a temporary file in the same directory, renamed over the old file: a reader sees one or
    the other; a failed write leaves the old file and no temporary file."""
    path = tmp_path / "hpcnet-x.service"
    path.write_text("old\n")
    renames = []
    real = os.rename
    monkeypatch.setattr(os, "rename", lambda src, dst: (renames.append((os.path.dirname(src), dst)), real(src, dst)))
    files.write_text(str(path), UNIT)
    assert renames == [(str(tmp_path), str(path))] and path.read_text() == UNIT

    def boom(_fd, _mode):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fdopen", boom)
    with pytest.raises(OSError):
        files.write_text(str(path), "new\n")
    assert path.read_text() == UNIT and os.listdir(tmp_path) == ["hpcnet-x.service"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_directory_fails_before_any_file_is_written(tmp_path):
    good, locked = tmp_path / "a", tmp_path / "b"
    good.mkdir()
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(OSError):
            files.apply({str(good / "x.conf"): ("x", 0o644), str(locked / "y.conf"): ("y", 0o644)}, check_mode=False)
    finally:
        locked.chmod(0o700)
    assert not (good / "x.conf").exists()


def test_every_module_writes_its_files_one_way():
    """No module or module_utils file writes a boot-time file its own way (atomic_move, a temporary file of its own)."""
    offenders = []
    for path in sorted((REPO / "plugins").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "files.py" and re.search(r"atomic_move\(|tempfile\.mkstemp\(", text):
            offenders.append(str(path.relative_to(REPO)))
    # the health program's textfile metrics are a runtime file, written as node_exporter asks (its own rename)
    assert offenders in ([], ["plugins/module_utils/health/exposition.py"]), offenders
