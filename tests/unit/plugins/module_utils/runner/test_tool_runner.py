"""The one command runner (runner/tool_runner.py): argv lists, the C locale, a timeout that kills the process group,
commands that change the host skipped in check mode."""

import os
import sys
import time

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import tool_runner


class _Module:
    def __init__(self, check_mode=False):
        self.check_mode = check_mode

    def get_bin_path(self, name, required=False):  # pylint: disable=unused-argument
        return None


def test_run_gives_stdout_and_stderr_apart_in_the_c_locale(monkeypatch):
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("GREP_OPTIONS", "--color")
    code = "import os, sys; print(os.environ['LC_ALL'], os.environ['LANG']); print('oops', file=sys.stderr); sys.exit(3)"
    rc, out, err = tool_runner.ModuleRunner(_Module()).run([sys.executable, "-c", code])
    assert (rc, out, err) == (3, "C C\n", "oops\n")
    done = tool_runner.run_process([sys.executable, "-c", "import os; print('GREP_OPTIONS' in os.environ)"],
                                   unset=("GREP_OPTIONS",))
    assert done["output"] == "False\n" and done["rc"] == 0


def test_a_command_that_changes_the_host_is_not_run_in_check_mode(tmp_path):
    marker = tmp_path / "ran"
    argv = [sys.executable, "-c", "open(%r, 'w').close()" % str(marker)]
    runner = tool_runner.ModuleRunner(_Module(check_mode=True))
    assert runner.run(argv, changes=True) == (0, "", "") and not marker.exists()
    assert runner.skipped == [argv]
    assert runner.run(argv)[0] == 0 and marker.exists()       # a read runs in check mode too
    marker.unlink()
    assert tool_runner.SubprocessRunner().run(argv, changes=True)[0] == 0 and marker.exists()


def test_a_hung_tool_is_killed_with_its_children_at_its_timeout(tmp_path):
    pidfile = tmp_path / "child"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "open(%r, 'w').write(str(p.pid)); time.sleep(60)" % str(pidfile))
    start = time.monotonic()
    rc, _out, err = tool_runner.SubprocessRunner().run([sys.executable, "-c", code], timeout=2)
    assert time.monotonic() - start < 20
    assert rc == -9 and "killed after 2 s" in err
    child = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the tool's child %d outlived the timeout" % child)


def test_a_program_that_cannot_start_is_rc_127_with_the_reason():
    rc, out, err = tool_runner.SubprocessRunner().run(["/nonexistent/tool", "-x"])
    assert rc == 127 and out == "" and "cannot run /nonexistent/tool" in err
