# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the launcher of nccl-tests (OpenMPI ``mpirun``, Slurm ``srun``, under coreutils ``timeout``) said when the job
failed: its own error lines classified into a cause and a fix, and the last lines of its stderr and stdout as
evidence (bounded).

The patterns are the launchers' own wording: glibc getopt's (srun: ``unrecognized option '--mca'``, ``invalid option
-- 'H'``), Slurm's srun and slurmstepd (``Unable to allocate resources: ...``, ``queued and waiting for resources``,
``execve(): ...: No such file or directory``, ``mpi/pmix...: ... collective timeout``), Open MPI's mpirun 4.x (ORTE)
and 5.x (PRRTE) help texts and coreutils ``timeout`` (exit status 124, 137 after ``--kill-after``, 127 when the
launcher itself is missing). Real captures: tests/fixtures/real/perftest-nccl-tests (SOURCES.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.perftest_output import matching_lines

EVIDENCE_LINES = 6        # last lines kept per stream
EVIDENCE_WIDTH = 300      # characters kept per line
TIMEOUT_RC = (124, 137)   # coreutils timeout: TERM sent (124), KILL after --kill-after (128 + 9)

# (kind, launcher it is from or None, patterns, cause, fix); the first kind with a matching line wins. %(opt)s etc.
# are the patterns' named groups; %(launcher)s the launcher of the run.
_FAILURES = (
    ("unknown_option", "srun",
     (re.compile(r"^srun: (?:unrecognized option '(?P<opt>[^']+)'|invalid option -- '(?P<short>[^']+)'"
                 r"|option '(?P<opt2>[^']+)' (?:requires an argument|doesn't allow an argument))"),),
     "srun refused its arguments (%(what)s): an option of another launcher (mpirun's --mca, -x, -H, -np) or a "
     "misspelled one was passed to srun",
     "give srun only srun's options: verify_srun_args (mpirun's go into verify_mpirun_args); `srun --help` lists them"),
    ("unknown_option", "mpirun",
     (re.compile(r"^(?:mpirun|mpiexec|prterun|prte): Error: unknown option \"(?P<opt>[^\"]+)\""),
      re.compile(r"^(?:mpirun|mpiexec): (?:unrecognized option '(?P<opt2>[^']+)'|invalid option -- '(?P<short>[^']+)')")),
     "mpirun refused its arguments (%(what)s): an option of another launcher (srun's --mpi, --partition) or a "
     "misspelled one was passed to mpirun",
     "give mpirun only mpirun's options: verify_mpirun_args (srun's go into verify_srun_args); `mpirun --help` lists "
     "them"),
    ("launcher_missing", None,
     (re.compile(r"^timeout: failed to run command '(?P<prog>[^']+)': (?P<why>.+)$"),),
     "the launcher %(prog)s could not be started on the launch host: %(why)s",
     "install it there, or give its path in verify_mpirun / verify_srun"),
    ("program_missing", "srun",
     (re.compile(r"^slurmstepd: error: execve\(\): (?P<prog>\S+): (?P<why>.+)$"),),
     "srun started the job, but a node cannot execute %(prog)s: %(why)s",
     "install nccl-tests on every node at the same path, or point verify_nccl_tests_dir at it"),
    ("program_missing", "mpirun",
     (re.compile(r"^mpirun was unable to (?:find the specified executable file|launch the specified application as "
                 r"it could not access)"),
      re.compile(r"^\s*Executable: (?P<prog>\S+)"),
      re.compile(r"could not access or execute an executable")),
     "mpirun could not find or execute %(prog)s on a host",
     "install nccl-tests on every host at the same path, or point verify_nccl_tests_dir at it"),
    ("no_allocation", "srun",
     (re.compile(r"^srun: error: (?:Unable to allocate resources|Job submit/allocate failed): (?P<why>.+)$"),),
     "Slurm gave srun no allocation: %(why)s",
     "check the nodes and partition srun asks for (sinfo; verify_slurm_node for hosts whose Slurm name differs from "
     "the inventory name; --partition in verify_srun_args)"),
    ("node_unavailable", "srun",
     (re.compile(r"^srun: (?:error: )?(?P<why>Required node not available \(down, drained or reserved\)|"
                 r"job \d+ queued and waiting for resources|Nodes? required for job are DOWN, DRAINED or reserved.*)"),),
     "a node the job needs is not available in Slurm (%(why)s): srun waited for it",
     "bring the node back (sinfo -R shows why it is down or drained; scontrol update NodeName=... State=RESUME) or "
     "leave the host out of the run (--limit)"),
    ("pmix_timeout", "srun",
     (re.compile(r"^slurmstepd: error: +mpi/pmix\S*: pmixp_coll\S*: .*collective timeout"),),
     "srun's PMIx plugin timed out wiring the ranks together: the nodes' slurmstepd could not reach each other",
     "check that the nodes reach each other on the management network (PMIx uses TCP between slurmstepd, "
     "SLURM_PMIX_DIRECT_CONN / PMIxDirectConn in mpi.conf) and that every node has the same PMIx version"),
    ("no_pmi", "srun",
     (re.compile(r"^The application appears to have been direct launched using \"srun\","),
      re.compile(r"^but OMPI was not built with SLURM's PMI support")),
     "srun did not wire the ranks together: it started them without PMIx (no --mpi=pmix, and no MpiDefault=pmix in "
     "slurm.conf or an --mpi=none over it), and Open MPI refuses to run a direct-launched rank without it",
     "set MpiDefault=pmix in slurm.conf (as GPU clusters do; `srun --mpi=list` shows the plugins Slurm has), or add "
     "--mpi=pmix to verify_srun_args"),
    ("daemons_failed", "mpirun",
     (re.compile(r"^ORTE was unable to reliably start one or more daemons"),
      re.compile(r"^PRTE has lost communication with a remote daemon"),
      re.compile(r"^ORTE has lost communication with a remote daemon"),
      re.compile(r"^ssh: (?P<why>.+)$")),
     "mpirun could not start or keep its daemons on the other hosts over SSH",
     "check passwordless SSH from the launch host to every host at the address mpirun uses (verify_oob_address), "
     "and that Open MPI is installed at the same path there"),
    ("not_enough_slots", "mpirun",
     (re.compile(r"^There are not enough slots available in the system to satisfy the (?P<n>\d+)"),),
     "mpirun had not enough slots for the %(n)s ranks it was asked for",
     "lower verify_nccl_ranks_per_host, or let mpirun oversubscribe (--oversubscribe in verify_mpirun_args)"),
    ("collective_failed", None,
     (re.compile(r"^srun: error: (?P<node>\S+): tasks? [\d,-]+: (?P<why>Exited with exit code \d+|Killed|"
                 r"Terminated|Segmentation fault.*)"),
      re.compile(r"^Primary job +terminated normally, but \d+ process returned"),
      re.compile(r"^mpirun detected that one or more processes exited with non-zero status"),
      re.compile(r"^(?:mpirun|prterun) noticed that process rank \d+ with PID \d+ on node (?P<node2>\S+) exited")),
     "%(launcher)s started nccl-tests, and a rank exited with an error (the ranks' own lines above say why)",
     "read the evidence lines (nccl-tests' `Test ... failure` and NCCL's WARN lines)"),
)


class _Groups(dict):
    def __missing__(self, key):
        return "?"


def tail(text, count=EVIDENCE_LINES, width=EVIDENCE_WIDTH):
    """The last ``count`` non-blank lines of ``text``, each cut to ``width`` characters."""
    lines = [ln.rstrip() for ln in (text or "").splitlines() if ln.strip()]
    return [ln if len(ln) <= width else ln[:width - 3] + "..." for ln in lines[-count:]]


def evidence(stdout, stderr, matched=()):
    """The launcher's own error lines (up to 4), then the last lines of its stderr and of its stdout, each tagged
    with its stream; one line appears once."""
    out, seen = [], set()
    for tag, lines in (("", list(matched)[:4]), ("stderr: ", tail(stderr)), ("stdout: ", tail(stdout))):
        for ln in lines:
            key = ln.strip()
            if key in seen:
                continue
            seen.add(key)
            out.append(tag + ln if tag else ln[:EVIDENCE_WIDTH])
    return out


def classify(launcher, stdout, stderr, rc, timeout=None):
    """A failed launch -> ``{kind, cause, fix, evidence}``; None for exit code 0 (and None).

    ``launcher``: ``mpirun`` or ``srun`` (the run's); a pattern of the other launcher does not apply. ``timeout``:
    the seconds the job had (verify_nccl_timeout), for the timeout's cause."""
    if rc in (0, None):
        return None
    lines = [ln.strip() for ln in ((stderr or "") + "\n" + (stdout or "")).splitlines() if ln.strip()]
    for kind, owner, patterns, cause, fix in _FAILURES:
        if owner not in (None, launcher):
            continue
        groups = _Groups(launcher=launcher)
        # a pattern table spells a field twice as name and name2 (a regex names a group once)
        matched = matching_lines(lines, patterns, groups, key=lambda name: name.rstrip("2"))
        if not matched:
            continue
        if kind == "unknown_option":
            groups["what"] = ("unknown option %s" % groups["opt"] if "opt" in groups
                              else "invalid option -%s" % groups["short"])
        if kind == "daemons_failed" and "why" in groups:
            cause += ": ssh said %(why)s"
        return {"kind": kind, "cause": cause % groups, "fix": fix % groups,
                "evidence": evidence(stdout, stderr, matched)}
    if rc in TIMEOUT_RC:
        return {"kind": "timeout",
                "cause": "%s did not finish within verify_nccl_timeout (%s s) and was killed by timeout (exit code "
                         "%s): the job hung (a rank waiting for a peer that never came, a launcher waiting for an "
                         "allocation or for its daemons)" % (launcher, timeout if timeout is not None else "?", rc),
                "fix": "read the last lines: they show where it stopped; raise verify_nccl_timeout only for long "
                       "test sizes",
                "evidence": evidence(stdout, stderr)}
    return {"kind": "exit_code",
            "cause": "%s or nccl-tests exited with code %s, without an error line this role knows" % (launcher, rc),
            "fix": "read the evidence lines (the last lines of stderr and stdout); check passwordless SSH (mpirun) or "
                   "the Slurm allocation (srun), and that nccl-tests exists on every host",
            "evidence": evidence(stdout, stderr)}
