# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the collection runs a program: argv lists (never a shell), the C locale (tool output parses the same
everywhere), a timeout that kills the program's whole process group, and check mode respected.

* :class:`ModuleRunner` is what a module hands the pure code of the other packages: ``which(name)``,
  ``run(argv, changes=False, timeout=None) -> (rc, out, err)`` and ``popen(argv, ...)`` over its AnsibleModule. A
  command that ``changes`` the host is not run in check mode (it is recorded in ``skipped``).
* :class:`SubprocessRunner` is the same interface without Ansible (benchmarks, ad-hoc use, the filters' helpers).
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


def run_process(argv, timeout=None, env=None, cwd=None, unset=()):
    """Run ``argv`` to its end, stdout and stderr merged, its process group killed after ``timeout`` seconds.

    Returns ``{rc, output, timed_out, error}``; ``error`` is set (and ``rc`` 127) when the program could not start.
    """
    res = {"rc": None, "output": "", "timed_out": False, "error": None}
    try:
        proc = popen(argv, env=env, cwd=cwd, unset=unset)
    except (OSError, ValueError) as exc:
        res.update(error="cannot run %s: %s" % (argv[0], exc), rc=127)
        return res
    try:
        out, _err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        res["timed_out"] = True
        kill_group(proc)
        out, _err = proc.communicate()
    res["rc"] = proc.returncode
    res["output"] = (out or b"").decode("utf-8", "replace")
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

    def popen(self, argv, env=None, cwd=None, **streams):
        return popen(argv, env=env, cwd=cwd, **streams)

    def _run_bounded(self, argv, timeout):
        done = run_process(argv, timeout=timeout)
        if done["error"]:
            return 127, "", done["error"]
        if done["timed_out"]:
            return 124, done["output"], "%s: killed after %s s" % (argv[0], timeout)
        return done["rc"], done["output"], ""


class ModuleRunner(_Runner):
    """The runner of a module (AnsibleModule.run_command and get_bin_path)."""

    def __init__(self, module):
        super(ModuleRunner, self).__init__()
        self.module = module
        self.check_mode = module.check_mode

    def which(self, name):
        return self.module.get_bin_path(name, required=False)

    def run(self, argv, changes=False, timeout=None):
        """``(rc, out, err)``. A run with a ``timeout`` returns stdout and stderr merged in ``out`` (rc 124 when it
        was killed)."""
        if self._skip(argv, changes):
            return 0, "", ""
        if timeout:
            return self._run_bounded(argv, timeout)
        return self.module.run_command([str(a) for a in argv], environ_update=dict(C_LOCALE), check_rc=False)


class SubprocessRunner(_Runner):
    """The same runner without Ansible: shutil.which and subprocess (benchmarks, ad-hoc use)."""

    def __init__(self, check_mode=False):
        super(SubprocessRunner, self).__init__()
        self.check_mode = check_mode

    def which(self, name):
        return shutil.which(name)

    def run(self, argv, changes=False, timeout=None):
        if self._skip(argv, changes):
            return 0, "", ""
        if timeout:
            return self._run_bounded(argv, timeout)
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=c_env(), check=False)
        return proc.returncode, proc.stdout, proc.stderr
