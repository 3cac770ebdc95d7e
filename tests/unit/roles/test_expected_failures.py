"""No task hides a module's failure behind ``failed_when: false`` without saying, in a comment on the task or just
above it, what failure it expects and where that failure is reported instead."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]
TASK_START = re.compile(r"^\s*- (name|[a-z_]+\.[a-z_]+\.[a-z_]+):")


def _unexplained():
    found = []
    for path in sorted(list((ROOT / "roles").rglob("*.yml")) + list((ROOT / "playbooks").rglob("*.yml"))):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if not re.match(r"^\s*failed_when: false\s*(#.*)?$", line):
                continue
            start = i
            while start > 0 and not TASK_START.match(lines[start]):
                start -= 1
            above = start - 1
            comments = [line] + [x for x in lines[start:i] if x.strip().startswith("#")]
            while above >= 0 and lines[above].strip().startswith("#"):
                comments.append(lines[above])
                above -= 1
            # the comment says which failure it expects: it names a failure (or what fails the host instead)
            commented = any("#" in c and re.search(r"fail|error|finding|refus|report", c.split("#", 1)[1], re.I)
                            for c in comments)
            if not commented:
                found.append("%s:%d" % (path.relative_to(ROOT), i + 1))
    return found


def test_every_failed_when_false_says_what_failure_it_expects():
    assert _unexplained() == []
