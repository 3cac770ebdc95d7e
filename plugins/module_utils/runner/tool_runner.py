# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the collection runs a program: argv lists (never a shell), the C locale (tool output parses the same
everywhere), a timeout that kills the program's whole process group, and check mode respected.

* :class:`ModuleRunner` is what a module hands the pure code of the other packages: ``which(name)``,
  ``run(argv, changes=False, timeout=TOOL_TIMEOUT) -> (rc, out, err)``. A command that
  ``changes`` the host is not run in check mode (it is recorded in ``skipped``); every run has a timeout (a tool that
  hangs on a broken device is killed, with its process group, and its ``err`` says so).
* :class:`SubprocessRunner` is the same interface without Ansible (benchmarks, tests, ad-hoc use).
* :func:`run_process` (a bounded run with merged output) and :func:`popen` (a started program whose output the caller
  reads as it comes: perftest, nccl-tests, the NCCL log scanner's grep) are what both runners use.
"""

from __future__ import absolute_import, division, print_function

import os
import shutil
import signal
import subprocess

__metaclass__ = type

C_LOCALE = {"LC_ALL": "C", "LANG": "C"}
# seconds a host tool may take (mlxconfig on a large card, dcb, ethtool, modprobe, dkms status): far above what a
# healthy one needs, short enough that a hung one does not hold the play
TOOL_TIMEOUT = 600
# for the streams of popen (a caller that wires pipes needs no subprocess import of its own)
PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT


def c_env(env=None, unset=()):
    """This process's environment without ``unset``, with the C locale, then ``env`` (strings) on top."""
    full = dict((k, v) for k, v in os.environ.items() if k not in unset)
    full.update(C_LOCALE)
    for key, value in (env or {}).items():
        full[str(key)] = str(value)
    return full


def popen(argv, env=None, cwd=None, stdin=DEVNULL, stdout=PIPE, stderr=STDOUT, unset=()):
    """Start ``argv`` (no shell) with the C locale (and without the ``unset`` variables) in a session of its own, so
    :func:`kill_group` stops what it started. Raises OSError or ValueError when it cannot start."""
    return subprocess.Popen([str(a) for a in argv], stdin=stdin, stdout=stdout, stderr=stderr,
                            env=c_env(env, unset), cwd=cwd, start_new_session=True)


def kill_group(proc):
    """Kill a program started by :func:`popen` and everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass


def run_process(argv, timeout=None, env=None, cwd=None, unset=(), merge=True):
    """Run ``argv`` to its end, its process group killed after ``timeout`` seconds; stdout and stderr merged in
    ``output`` (or, with ``merge`` false, stderr apart in ``error_output``).

    Returns ``{rc, output, error_output, timed_out, error}``; ``error`` is set (and ``rc`` 127) when the program could
    not start.
    """
    res = {"rc": None, "output": "", "error_output": "", "timed_out": False, "error": None}
    try:
        proc = popen(argv, env=env, cwd=cwd, unset=unset, stderr=STDOUT if merge else PIPE)
    except (OSError, ValueError) as exc:
        res.update(error="cannot run %s: %s" % (argv[0], exc), rc=127)
        return res
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        res["timed_out"] = True
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:     # a grandchild of its own session still holds the pipes
            out, err = b"", b""
    res["rc"] = proc.returncode
    res["output"] = (out or b"").decode("utf-8", "replace")
    res["error_output"] = (err or b"").decode("utf-8", "replace")
    return res


class _Runner:
    check_mode = False

    def __init__(self):
        self.skipped = []

    def _skip(self, argv, changes):
        """True (and the command recorded) when ``argv`` changes the host and this is a check run."""
        if changes and self.check_mode:
            self.skipped.append([str(a) for a in argv])
            return True
        return False

    def _run_bounded(self, argv, timeout):
        """``(rc, out, err)``; a program killed at its timeout has its signal's rc (-9) and says so in ``err``."""
        done = run_process(argv, timeout=timeout, merge=False)
        if done["error"]:
            return 127, "", done["error"]
        err = done["error_output"]
        if done["timed_out"]:
            err = "%s%s: killed after %s s" % (err + "\n" if err else "", argv[0], timeout)
        return done["rc"], done["output"], err


class ModuleRunner(_Runner):
    """The runner of a module (AnsibleModule.run_command and get_bin_path)."""

    def __init__(self, module):
        super(ModuleRunner, self).__init__()
        self.module = module
        self.check_mode = module.check_mode

    def which(self, name):
        return self.module.get_bin_path(name, required=False)

    def run(self, argv, changes=False, timeout=TOOL_TIMEOUT):
        """``(rc, out, err)`` of ``argv``, killed after ``timeout`` seconds; not run in check mode when it
        ``changes`` the host."""
        if self._skip(argv, changes):
            return 0, "", ""
        return self._run_bounded(argv, timeout)


class SubprocessRunner(_Runner):
    """The same runner without Ansible: shutil.which and subprocess (benchmarks, ad-hoc use)."""

    def __init__(self, check_mode=False):
        super(SubprocessRunner, self).__init__()
        self.check_mode = check_mode

    def which(self, name):
        return shutil.which(name)

    def run(self, argv, changes=False, timeout=TOOL_TIMEOUT):
        if self._skip(argv, changes):
            return 0, "", ""
        return self._run_bounded(argv, timeout)
