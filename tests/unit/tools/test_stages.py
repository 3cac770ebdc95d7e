"""tests/tools/stages: `make test`'s stages in order, stages joined by + side by side, each stage's time at the end."""
import subprocess
from pathlib import Path

STAGES = Path(__file__).resolve().parents[2] / "tools" / "stages"
# a and b each wait for the other to have started: they pass only side by side
MAKEFILE = """\
a:
\t@touch a.on; for i in $$(seq 600); do test -e b.on && break; sleep 0.1; done; test -e b.on && echo A ran
b:
\t@touch b.on; for i in $$(seq 600); do test -e a.on && break; sleep 0.1; done; test -e a.on && echo B ran
c:
\t@echo C ran
bad:
\t@echo BAD ran; false
"""


def _stages(tmp_path, *groups):
    (tmp_path / "Makefile").write_text(MAKEFILE, encoding="utf-8")
    return subprocess.run([str(STAGES), *groups], cwd=tmp_path, capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "ANSIBLE_HOME": str(tmp_path)})


def test_stages_joined_by_a_plus_run_side_by_side_each_with_its_own_time(tmp_path):
    run = _stages(tmp_path, "a+b", "c")
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert out.index("A ran") < out.index("B ran") < out.index("C ran") < out.index("== stage times")
    table = out[out.index("== stage times"):].splitlines()
    assert [line.split()[0] for line in table[1:]] == ["a", "b", "c", "total"]
    assert table[1].endswith("passed, beside b") and table[2].endswith("passed, beside a")
    assert table[3].endswith("passed")


def test_a_failed_stage_side_by_side_stops_the_run_after_its_group(tmp_path):
    run = _stages(tmp_path, "c+bad", "c")
    assert run.returncode != 0
    table = run.stdout[run.stdout.index("== stage times"):].splitlines()
    assert [line.split()[0] for line in table[1:]] == ["c", "bad", "total"]
    assert "FAILED" in table[2] and "beside c" in table[2] and "passed, beside bad" in table[1]
    assert "BAD ran" in run.stdout
