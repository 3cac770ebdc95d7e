# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hpcnet.rdma.rdma_host_settings module's work: one host's memlock files, RDMA modules and nvidia_peermem, read,
planned, then applied, in one call (the rdma_host role's one module call; the rules are host_settings.py's).

* :func:`limits_text`, :func:`system_conf_text`: the two memlock files as the host keeps them.
* :func:`pam_applies`: whether a login service's PAM session stack calls pam_limits (so limits.d applies).
* :class:`HostSettings`: ``plan()`` reads the host and returns what differs, failing before any change on bad input
  or a module modprobe cannot find; ``apply()`` writes, loads and checks, behind the caller's check-mode gate.

The host is reached through two callables the module passes in: ``runner`` (tool_runner.ModuleRunner: ``which``,
``run``) and ``write(path, text)`` (an atomic replace with mode 0644).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import os
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.host import host_settings as hs
from ansible_collections.hpcnet.rdma.plugins.module_utils.host import kernel_modules as km

MANAGED = "Managed by hpcnet.rdma (rdma_host role); a change here is overwritten at its next run."
LOAD_FILE_HEADER = ["Managed by hpcnet.rdma: kernel modules loaded at every boot (systemd-modules-load)."]
# "session required pam_limits.so", "-session optional /lib/security/pam_limits.so", "session [default=1] ..."
PAM_LIMITS_RE = re.compile(r"^\s*-?session\s+(\[[^\]]*\]|\S+)\s+(\S*/)?pam_limits\.so", re.MULTILINE)


class HostSettingsFailure(Exception):
    """A failure the role reports as is (the message names the input or the fix)."""


def limits_text(memlock):
    """limits.d file: soft and hard memlock for every user and for root (the wildcard does not match root)."""
    value = memlock["limits"]
    return "".join([
        "# %s\n" % MANAGED,
        "# Locked-memory limit for RDMA (hpcnet.rdma.rdma_host): verbs pin every buffer they register (ibv_reg_mr), and\n",
        "# registration fails with ENOMEM (\"Cannot allocate memory\") above this limit. Read by pam_limits at login.\n",
        "# The value is in KiB, or unlimited. The wildcard does not match root, hence its own lines.\n",
        "# <domain> <type> <item>   <value>\n",
    ] + ["%-10s %-6s memlock  %s\n" % (domain, kind, value) for domain in ("*", "root") for kind in ("soft", "hard")])


def system_conf_text(memlock):
    """system.conf.d drop-in: the default memlock limit of the services the systemd manager starts."""
    return "".join([
        "# %s\n" % MANAGED,
        "# Default locked-memory limit of the services the systemd manager starts (slurmd, containerd, ...), for RDMA\n",
        "# (hpcnet.rdma.rdma_host). Read at boot and by \"systemctl daemon-reexec\"; services already running keep their\n",
        "# limit until they are restarted. A unit's own LimitMEMLOCK= still overrides it.\n",
        "[Manager]\n",
        "DefaultLimitMEMLOCK=%s\n" % memlock["systemd"],
    ])


def pam_applies(texts):
    """True when one of the PAM service files' texts calls pam_limits in its session stack."""
    return any(PAM_LIMITS_RE.search(text or "") for text in texts)


def _read(path):
    """A file's text (undecodable bytes replaced), or None where it cannot be read."""
    try:
        with open(path, errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


class HostSettings:
    """One host's rdma_host settings. ``params`` are the module's options."""

    def __init__(self, params, runner, write):
        self.p = params
        self.runner = runner
        self.write = write
        self.root = params["sysfs_root"]
        self.kernel = os.uname()[2]
        self.warnings = []
        self.commands = []
        self.written = []

    # -- plan: reads only ------------------------------------------------------------------------------------------
    def _check_options(self):
        paths = [self.p[k] for k in ("limits_file", "systemd_file", "modules_load_file", "gdr_load_file")]
        if len(set(paths)) != len(paths):
            raise HostSettingsFailure("limits_file, systemd_file, modules_load_file and gdr_load_file must be four "
                                      "different files; got %s." % ", ".join(paths))
        for key in ("gpu_module", "peermem_module"):
            if not hs.MODULE_NAME_RE.match(self.p[key] or ""):
                raise HostSettingsFailure("%s takes a kernel module name (letters, digits, '_' and '-', as in "
                                          "nvidia_peermem); got %r." % (key, self.p[key]))

    def plan(self):
        """What differs; a boot file of this module that is no longer wanted (no modules, no nvidia_peermem) is
        planned as None: it is removed, so that the next boot does not load what the inputs no longer ask for."""
        self._check_options()
        gpu_present = os.path.isdir(os.path.join(self.root, "module", km.sysfs_name(self.p["gpu_module"])))
        prof = hs.profile({"rdma_host_memlock": self.p["memlock"], "rdma_host_modules": self.p["modules"],
                           "rdma_host_ipoib": self.p["ipoib"], "rdma_host_gdr": self.p["gdr"]}, gpu_present)
        if prof["errors"]:
            raise HostSettingsFailure(" ".join(prof["errors"]))
        peermem = self.p["peermem_module"]
        files = {self.p["limits_file"]: limits_text(prof["memlock"]),
                 self.p["systemd_file"]: system_conf_text(prof["memlock"])}
        files[self.p["modules_load_file"]] = (
            km.render_load_file(prof["modules"], LOAD_FILE_HEADER) if prof["modules"] else None)
        files[self.p["gdr_load_file"]] = (
            km.render_load_file([peermem], LOAD_FILE_HEADER) if prof["peermem_wanted"] else None)
        before = dict((path, _read(path)) for path in files)
        to_load = [n for n in prof["modules"] + ([peermem] if prof["peermem_wanted"] else []) if not km.loaded(self.root, n)]
        self._probe(to_load, peermem)
        return {"profile": prof, "files": files, "before": before, "to_load": to_load,
                "changed_files": sorted(path for path in files if before[path] != files[path])}

    def _modprobe(self):
        modprobe = self.runner.which("modprobe")
        if not modprobe:
            raise HostSettingsFailure("Nothing was changed on %s (kernel %s): modprobe is not installed (kmod)."
                                      % (self.p["host_label"], self.kernel))
        return modprobe

    def _probe(self, to_load, peermem):
        """modprobe -n (a dry run) of every module to load: a missing module fails before anything changes."""
        for name in to_load:
            rc, out, err = self.runner.run([self._modprobe(), "-n", name])
            if rc != 0:
                msg = "modprobe %s failed (exit %d): %s" % (name, rc, (err or out).strip())
                if name == peermem:
                    raise HostSettingsFailure(hs.peermem_failure(msg, "", self.kernel, self.p["gpu_driver_rebuild"])["msg"])
                raise HostSettingsFailure("Nothing was changed on %s (kernel %s): %s"
                                          % (self.p["host_label"], self.kernel, msg))

    # -- apply: behind the module's check-mode gate ----------------------------------------------------------------
    def apply(self, plan):
        """Memlock files (and the manager's re-exec), then each modules-load.d file once its modules are loaded."""
        memlock_files = [self.p["limits_file"], self.p["systemd_file"]]
        self._write(plan, memlock_files)
        if self.reexec(plan):
            self._run_checked([self.runner.which("systemctl") or "systemctl", "daemon-reexec"])
        peermem = self.p["peermem_module"]
        rdma = [n for n in plan["to_load"] if n != peermem]
        for name in rdma:
            self._load(name)
        missing = [n for n in rdma if not km.loaded(self.root, n)]
        if missing:
            raise HostSettingsFailure("modprobe succeeded, but %s is not loaded (no %s)" % (
                ", ".join(missing), ", ".join(os.path.join(self.root, "module", km.sysfs_name(n)) for n in missing)))
        self._write(plan, [self.p["modules_load_file"]])
        if peermem in plan["to_load"]:
            self._load(peermem)
            if not self._peermem_loaded():
                raise HostSettingsFailure(self._not_loaded_message())
        self._write(plan, [self.p["gdr_load_file"]])

    def reexec(self, plan):
        """Whether the systemd manager re-reads its drop-in: it changed, and systemd is PID 1 (sd_booted)."""
        return self.p["systemd_file"] in plan["changed_files"] and os.path.isdir("/run/systemd/system")

    def _write(self, plan, paths):
        for path in paths:
            if path in plan["changed_files"]:
                if plan["files"][path] is None:
                    os.remove(path)
                else:
                    self.write(path, plan["files"][path])
                self.written.append(path)

    def _peermem_loaded(self):
        peermem = self.p["peermem_module"]
        proc = _read(self.p["proc_modules"]) or ""
        return km.loaded(self.root, peermem) or any(line.startswith(peermem + " ") for line in proc.splitlines())

    def _not_loaded_message(self):
        peermem = self.p["peermem_module"]
        return ("modprobe %s succeeded on %s, but the module is not loaded: neither %s nor %s shows it. Check "
                "\"lsmod | grep nvidia_peermem\" and \"dmesg | grep -i peermem\", and whether something unloads it "
                "(a blacklist entry in /etc/modprobe.d, the GPU operator's peermem container)."
                % (peermem, self.p["host_label"], os.path.join(self.root, "module", peermem), self.p["proc_modules"]))

    def _load(self, name):
        self.commands.append("modprobe %s" % name)
        rc, out, err = self.runner.run([self._modprobe(), name], changes=True)
        if rc != 0:
            msg = "modprobe %s failed (exit %d): %s" % (name, rc, (err or out).strip())
            if name == self.p["peermem_module"]:
                dmesg_path = self.runner.which("dmesg")
                dmesg = self.runner.run([dmesg_path])[1] if dmesg_path else ""
                raise HostSettingsFailure(hs.peermem_failure(msg, dmesg, self.kernel, self.p["gpu_driver_rebuild"])["msg"])
            raise HostSettingsFailure(msg)

    def _run_checked(self, argv):
        self.commands.append(" ".join([os.path.basename(argv[0])] + argv[1:]))
        rc, out, err = self.runner.run(argv)
        if rc != 0:
            raise HostSettingsFailure("%s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip()))

    # -- after apply (or instead of it in check mode): what the host has -------------------------------------------
    def state(self, plan, check_mode):
        prof = plan["profile"]
        pam_dir = self.p["pam_dir"]
        if not pam_applies(_read(os.path.join(pam_dir, name)) for name in self.p["pam_files"]):
            self.warnings.append(
                "none of %s on %s calls pam_limits.so in its session stack, so %s does not apply to SSH or console "
                "logins (ulimit -l stays at the old value, and so do jobs started from them). Add \"session required "
                "pam_limits.so\" to the login services' PAM configuration."
                % (", ".join(os.path.join(pam_dir, n) for n in self.p["pam_files"]), self.p["host_label"],
                   self.p["limits_file"]))
        if prof["gdr"] == "true" and prof["gpu_driver"] == "absent":
            self.warnings.append(
                "rdma_gdr is true, but %s has no NVIDIA GPU driver loaded (%s is missing): nvidia_peermem is not "
                "loaded and GPUDirect RDMA stays off (rdma_host_gdr_state no_gpu_driver). Install and load the GPU "
                "driver and run this role again, or set rdma_gdr to auto for hosts without GPUs."
                % (self.p["host_label"], os.path.join(self.root, "module", self.p["gpu_module"])))
        loaded = self._peermem_loaded()
        gdr_state = prof["gdr_state"]
        if prof["peermem_wanted"]:
            gdr_state = "loaded" if loaded else "would_load" if check_mode else "not_loaded"
        if gdr_state == "not_loaded":
            raise HostSettingsFailure(self._not_loaded_message())
        return {"memlock": prof["memlock"]["value"], "modules": prof["modules"], "gdr": gdr_state,
                "gpu_driver": prof["gpu_driver"], "peermem": "loaded" if loaded else "not_loaded"}
