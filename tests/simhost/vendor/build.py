#!/usr/bin/env python3
"""Build the stand-ins of NVIDIA's RDMA stack artifacts, and the air-gapped distribution mirror, on this machine.

    python3 tests/simhost/vendor/build.py --out tests/output/vendor [--kernel RELEASE]

Output (served as it is by the mirror container, tests/container/mirror-up.yml):
  mirror/public/repo/doca/GPG-KEY-Mellanox.pub             vendor test key (armored)
  mirror/public/repo/doca/<ver>/debian12/x86_64/           flat apt repositories, one per DOCA version, signed
  mirror/downloads/DOCA/DOCA_v<ver>/host/doca-host_...deb  the local-repo packages
  mirror/ofed/MLNX_OFED-<ver>/MLNX_OFED_LINUX-<ver>-debian12-x86_64.{tgz,iso}
  mirror/debian/ (+ debian-archive-key.asc)                the distribution mirror an air-gapped site keeps:
                                                           kernel headers, a newer kernel, the vendor packages'
                                                           dependencies, the inbox rdma-core family and the
                                                           site's packages that depend on it (Open MPI, ...)
  mirror/debian-updates/                                   a distribution update of rdma-core that sorts above
                                                           the vendor's (an epoch), for the pinning test
  SHA256SUMS                                               sha256 of every downloadable artifact
Uses Debian's own tools: apt-get download, dpkg-deb, apt-ftparchive, gpg, genisoimage (or xorriso).
A second run with the same inputs rebuilds nothing (stamp file).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stacks  # noqa: E402  pylint: disable=wrong-import-position

HERE = Path(__file__).resolve().parent
MAINTAINER = "NVIDIA stand-in (hpcnet.rdma test bed) <hpcnet-rdma@example.invalid>"
KEY_VENDOR = "hpcnet.rdma test bed: NVIDIA repository stand-in"
KEY_DISTRO = "hpcnet.rdma test bed: distribution mirror stand-in"


def run(argv, **kw):
    kw.setdefault("check", True)
    return subprocess.run(argv, **kw)


def write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def newer_kernel(release: str) -> str:
    """6.18.44-fc-v1098 -> 6.18.45-hpcnet1: a kernel that sorts above the running one (the drift test)."""
    nums = [int(n) for n in re.findall(r"\d+", release)[:3]] + [0, 0, 0]
    return "%d.%d.%d-hpcnet1" % (nums[0], nums[1], nums[2] + 1)


# ---- packages -------------------------------------------------------------------------------------------------
def build_deb(workdir: Path, outdir: Path, name: str, version: str, files: dict, *, depends=(), arch="all",
              description="", scripts=None, conffiles=(), extra_control="") -> Path:
    """A binary package from a dict of path -> (text, mode)."""
    root = workdir / ("%s_%s" % (name, version.replace(":", "%3a")))
    shutil.rmtree(root, ignore_errors=True)
    (root / "DEBIAN").mkdir(parents=True)
    for path, (text, mode) in files.items():
        write(root / path.lstrip("/"), text, mode)
    control = ["Package: %s" % name, "Version: %s" % version, "Architecture: %s" % arch, "Maintainer: %s" % MAINTAINER,
               "Priority: optional", "Section: net"]
    if depends:
        control.append("Depends: %s" % ", ".join(depends))
    control.append(extra_control.strip()) if extra_control.strip() else None
    control.append("Description: %s" % (description or name))
    write(root / "DEBIAN/control", "\n".join(control) + "\n")
    for script, text in (scripts or {}).items():
        write(root / "DEBIAN" / script, text, 0o755)
    if conffiles:
        write(root / "DEBIAN/conffiles", "".join(c + "\n" for c in conffiles))
    outdir.mkdir(parents=True, exist_ok=True)
    deb = outdir / ("%s_%s_%s.deb" % (name, version.split(":")[-1], arch))
    run(["dpkg-deb", "--root-owner-group", "-Zxz", "-b", str(root), str(deb)], stdout=subprocess.DEVNULL)
    return deb


def mlnx_naming_rules(root: Path) -> list:
    """MLNX_OFED's / DOCA-OFED's rdma-core ships 60-rdma-persistent-naming.rules with NAME_KERNEL (the devices keep
    the kernel's mlx5_<N> names; tests/fixtures/real/ib-stack/rdma-persistent-naming-rules-shipped-02.txt), Debian's
    with NAME_FALLBACK: rewrite the rule of an unpacked rdma-core tree so. Returns the files changed."""
    changed = []
    for rel in ("lib/udev/rules.d", "usr/lib/udev/rules.d"):
        path = root / rel / "60-rdma-persistent-naming.rules"
        if path.is_file():
            text = path.read_text()
            new = text.replace('PROGRAM="rdma_rename %k NAME_FALLBACK"', 'PROGRAM="rdma_rename %k NAME_KERNEL"')
            if new != text:
                path.write_text(new)
                changed.append(path)
    sums = root / "DEBIAN/md5sums"
    if changed and sums.is_file():   # the package's own checksums follow (dpkg --verify, debsums)
        lines = []
        for line in sums.read_text().splitlines():
            digest, _sep, rel = line.partition("  ")
            if root / rel in changed:
                digest = hashlib.md5((root / rel).read_bytes()).hexdigest()  # noqa: S324 (dpkg's format)
            lines.append(f"{digest}  {rel}")
        sums.write_text("\n".join(lines) + "\n")
    return changed


def reversion_deb(src: Path, outdir: Path, workdir: Path, version: str) -> Path:
    """Debian's real package under the vendor's version (and maintainer): the binaries stay the real ones; the
    udev naming rule is the vendor's (mlnx_naming_rules)."""
    root = workdir / ("re-" + src.name)
    shutil.rmtree(root, ignore_errors=True)
    run(["dpkg-deb", "-R", str(src), str(root)])
    mlnx_naming_rules(root)
    control = (root / "DEBIAN/control").read_text()
    original = re.search(r"(?m)^Version: (.*)$", control).group(1)
    # exact dependencies inside the family (infiniband-diags on libibnetdisc5 (= 44.0-2)) follow the new version
    control = control.replace("(= %s)" % original, "(= %s)" % version)
    control = re.sub(r"(?m)^Version: .*$", "Version: %s" % version, control)
    control = re.sub(r"(?m)^Maintainer: .*$", "Maintainer: %s" % MAINTAINER, control)
    (root / "DEBIAN/control").write_text(control)
    name = re.search(r"(?m)^Package: (.*)$", control).group(1)
    arch = re.search(r"(?m)^Architecture: (.*)$", control).group(1)
    deb = outdir / ("%s_%s_%s.deb" % (name, version.split(":")[-1], arch))
    outdir.mkdir(parents=True, exist_ok=True)
    run(["dpkg-deb", "--root-owner-group", "-Zxz", "-b", str(root), str(deb)], stdout=subprocess.DEVNULL)
    return deb


def text_of(name: str) -> str:
    return (HERE / "files" / name).read_text()


def vendor_packages(workdir: Path, outdir: Path, debian_debs: dict, ofed_version: str, rdma_core_version: str,
                    provider: str, doca_version: str = "") -> list:
    """The vendor's packages of one stack version (DOCA or MLNX_OFED share them, as NVIDIA's do)."""
    pkgver = stacks.package_version(ofed_version)
    dkver = stacks.dkms_version(ofed_version)
    modver = stacks.module_version(ofed_version)
    debs = []
    ofed_info = text_of("ofed_info").replace("@OFED_VERSION@", ofed_version)
    all_vendor = " ".join(sorted(set(stacks.RDMA_CORE_PACKAGES + ["ofed-scripts", "mlnx-ofed-kernel-utils",
                                                                  "mlnx-ofed-kernel-dkms", "mlnx-tools", "perftest"]
                                     + list(stacks.DOCA_PROFILES) + ["doca-networking-userspace",
                                                                     "doca-all-userspace"])))
    debs.append(build_deb(workdir, outdir, "ofed-scripts", pkgver, {
        "/usr/bin/ofed_info": (ofed_info, 0o755),
        "/usr/sbin/ofed_uninstall.sh": (text_of("ofed_uninstall.sh").replace("@PACKAGES@", all_vendor), 0o755),
    }, arch="amd64", description="MLNX_OFED utilities"))
    debs.append(build_deb(workdir, outdir, "mlnx-ofed-kernel-utils", pkgver, {
        "/etc/infiniband/openib.conf": (text_of("openib.conf"), 0o644),
        "/etc/infiniband/info": (text_of("info").replace("@DKMS_VERSION@", dkver), 0o755),
        "/etc/init.d/openibd": (text_of("openibd"), 0o755),
    }, depends=["ofed-scripts"], arch="amd64", conffiles=["/etc/infiniband/openib.conf"],
        description="Userspace tools to restart and tune mlx5 kernel modules"))
    src = "/usr/src/%s-%s" % (stacks.DKMS_MODULE, dkver)
    dkms_conf = text_of("dkms.conf").replace("@DKMS_VERSION@", dkver).replace("@MODULE_VERSION@", modver)
    for i, mod in enumerate(stacks.KERNEL_MODULES):
        dkms_conf += 'BUILT_MODULE_NAME[%d]="%s"\nDEST_MODULE_LOCATION[%d]="/updates/dkms"\n' % (i, mod, i)
    debs.append(build_deb(workdir, outdir, "mlnx-ofed-kernel-dkms", pkgver, {
        src + "/dkms.conf": (dkms_conf, 0o644),
        src + "/build-modules": (text_of("build-modules").replace("@MODULES@", " ".join(stacks.KERNEL_MODULES)), 0o755),
    }, depends=["dkms", "gcc", "make", "mlnx-ofed-kernel-utils"],
        scripts={"postinst": text_of("dkms.postinst").replace("@DKMS_VERSION@", dkver),
                 "prerm": text_of("dkms.prerm").replace("@DKMS_VERSION@", dkver)},
        description="DKMS support for mlnx-ofed kernel modules"))
    tools = {"/usr/bin/%s" % t: ("#!/bin/sh\n# mlnx-tools stand-in: the simulated host's %s\nexec /opt/simhost/bin/%s \"$@\"\n"
                                 % (t, t), 0o755) for t in ("mlnx_qos", "cma_roce_mode", "cma_roce_tos")}
    debs.append(build_deb(workdir, outdir, "mlnx-tools", pkgver, tools, description="Mellanox userland tools"))
    for name in stacks.RDMA_CORE_PACKAGES:
        debs.append(reversion_deb(debian_debs[name], outdir, workdir, rdma_core_version))
    debs.append(reversion_deb(debian_debs["perftest"], outdir, workdir,
                              "%s.0.%s-1" % (stacks.ofed_short(ofed_version), ofed_version.split("-")[1].replace(".", ""))))
    if provider == "doca":
        # the meta-packages carry the DOCA version (<doca>-<build>), which is how an installed DOCA is told
        for meta, deps in stacks.DOCA_PROFILES.items():
            debs.append(build_deb(workdir, outdir, meta, doca_version, {}, depends=deps, description="DOCA %s" % meta))
        for meta in ("doca-networking-userspace", "doca-all-userspace"):
            debs.append(build_deb(workdir, outdir, meta, doca_version, {}, description="DOCA %s" % meta))
    return debs


# ---- repositories ---------------------------------------------------------------------------------------------
def gpg(home: Path, *args, **kw):
    return run(["gpg", "--homedir", str(home), "--batch", "--quiet", "--pinentry-mode", "loopback",
                "--passphrase", ""] + list(args), **kw)


def make_key(home: Path, uid: str) -> str:
    out = gpg(home, "--list-keys", "--with-colons", uid, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        gpg(home, "--quick-gen-key", uid, "ed25519", "sign", "never")
        out = gpg(home, "--list-keys", "--with-colons", uid, capture_output=True, text=True)
    return re.search(r"(?m)^fpr:+([0-9A-F]+):", out.stdout).group(1)


def flat_repo(repo: Path, home: Path, fpr: str, origin: str, label: str) -> None:
    """A flat apt repository ("deb URL ./"), Release signed inline (InRelease) and detached (Release.gpg)."""
    packages = run(["apt-ftparchive", "packages", "."], cwd=repo, capture_output=True, text=True).stdout
    (repo / "Packages").write_text(packages)
    run(["gzip", "-9nkf", "Packages"], cwd=repo)
    release = run(["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=%s" % origin,
                   "-o", "APT::FTPArchive::Release::Label=%s" % label, "release", "."],
                  cwd=repo, capture_output=True, text=True).stdout
    (repo / "Release").write_text(release)
    for f in ("InRelease", "Release.gpg"):
        (repo / f).unlink(missing_ok=True)
    gpg(home, "--local-user", fpr, "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release"))
    gpg(home, "--local-user", fpr, "-abs", "-o", str(repo / "Release.gpg"), str(repo / "Release"))


def download_debian(names, dest: Path) -> dict:
    dest.mkdir(parents=True, exist_ok=True)
    missing = [n for n in names if not list(dest.glob("%s_*.deb" % n))]
    if missing and run(["apt-get", "download", "-q"] + missing, cwd=dest, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False).returncode != 0:
        run(["apt-get", "update", "-qq"])  # a fresh machine may have no package lists yet
        run(["apt-get", "download", "-q"] + missing, cwd=dest, stdout=subprocess.DEVNULL)
    return {n: sorted(dest.glob("%s_*.deb" % n))[-1] for n in names}


def make_iso(src: Path, iso: Path, volid: str) -> None:
    tool = shutil.which("genisoimage") or shutil.which("xorrisofs") or shutil.which("mkisofs")
    if not tool:
        return
    run([tool, "-quiet", "-r", "-J", "-V", volid[:32], "-o", str(iso), str(src)])


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build(out: Path, kernel: str) -> None:
    mirror = out / "mirror"
    work = out / "work"
    home = out / "gnupg"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    vendor_fpr = make_key(home, KEY_VENDOR)
    distro_fpr = make_key(home, KEY_DISTRO)
    doca_root = mirror / "public/repo/doca"
    doca_root.mkdir(parents=True, exist_ok=True)
    gpg(home, "--armor", "--export", "-o", str(doca_root / "GPG-KEY-Mellanox.pub.new"), vendor_fpr)
    os.replace(doca_root / "GPG-KEY-Mellanox.pub.new", doca_root / "GPG-KEY-Mellanox.pub")
    gpg(home, "--armor", "--export", "-o", str(mirror / "debian-archive-key.asc.new"), distro_fpr)
    os.replace(mirror / "debian-archive-key.asc.new", mirror / "debian-archive-key.asc")
    debian_debs = download_debian(stacks.RDMA_CORE_PACKAGES + stacks.DISTRO_DEPENDENCIES + stacks.SITE_PACKAGES,
                                  out / "debian-pool")

    # DOCA: online repositories and local-repo packages
    for ver, info in stacks.DOCA.items():
        repo = doca_root / ver / stacks.DISTRO / stacks.ARCH
        shutil.rmtree(repo, ignore_errors=True)
        vendor_packages(work, repo, debian_debs, info["ofed"], info["rdma_core"], "doca", "%s-%s" % (ver, info["build"]))
        flat_repo(repo, home, vendor_fpr, "NVIDIA", "DOCA %s %s" % (ver, stacks.DISTRO))
        name = stacks.local_repo_name(ver)
        localroot = work / ("localrepo-" + ver)
        shutil.rmtree(localroot, ignore_errors=True)
        (localroot / "DEBIAN").mkdir(parents=True)
        shutil.copytree(repo, localroot / ("usr/share/%s/repo" % name))
        shutil.copy(doca_root / "GPG-KEY-Mellanox.pub", localroot / ("usr/share/%s/repo/GPG-KEY-Mellanox.pub" % name))
        write(localroot / "etc/apt/sources.list.d/doca.list",
              "deb [signed-by=/usr/share/%s/repo/GPG-KEY-Mellanox.pub] file:/usr/share/%s/repo ./\n" % (name, name))
        write(localroot / "DEBIAN/control",
              "Package: doca-host\nVersion: %s-%s\nArchitecture: %s\nMaintainer: %s\nPriority: optional\nSection: net\n"
              "Description: DOCA-Host local repository %s\n" % (ver, info["build"], stacks.DEB_ARCH, MAINTAINER, name))
        write(localroot / "DEBIAN/conffiles", "/etc/apt/sources.list.d/doca.list\n")
        dl = mirror / ("downloads/DOCA/DOCA_v%s/host" % ver)
        dl.mkdir(parents=True, exist_ok=True)
        run(["dpkg-deb", "--root-owner-group", "-Zxz", "-b", str(localroot), str(dl / stacks.local_repo_deb(ver))],
            stdout=subprocess.DEVNULL)

    # MLNX_OFED: tarball and ISO
    for ver, info in stacks.MLNX_OFED.items():
        name = stacks.mlnx_ofed_name(ver)
        top = work / name
        shutil.rmtree(top, ignore_errors=True)
        vendor_packages(work, top / "DEBS", debian_debs, ver, info["rdma_core"], "mlnx_ofed")
        write(top / "mlnxofedinstall", text_of("mlnxofedinstall"), 0o755)
        write(top / "uninstall.sh", "#!/bin/sh\n# MLNX_OFED uninstall (stand-in): the installed ofed-scripts' ofed_uninstall.sh\n"
              "exec /usr/sbin/ofed_uninstall.sh \"$@\"\n", 0o755)
        write(top / ".mlnx", ver + "\n")
        write(top / "distro", stacks.DISTRO + "\n")
        write(top / ".arch", stacks.ARCH + "\n")
        write(top / ".supported_kernels", stacks.MLNX_OFED_BUILT_FOR + "\n")
        dest = mirror / ("ofed/MLNX_OFED-%s" % ver)
        dest.mkdir(parents=True, exist_ok=True)
        run(["tar", "--owner=0", "--group=0", "--sort=name", "--mtime=@0", "-czf", str(dest / (name + ".tgz")), name],
            cwd=work)
        make_iso(top, dest / (name + ".iso"), "MLNX_OFED_LINUX")

    # the distribution mirror: headers of the running kernel, a newer kernel without headers, dependencies
    debian = mirror / "debian"
    shutil.rmtree(debian, ignore_errors=True)
    debian.mkdir(parents=True)
    for deb in debian_debs.values():
        shutil.copy(deb, debian)
    build_deb(work, debian, "linux-headers-%s" % kernel, "%s-1" % kernel.split("-")[0], {
        "/usr/src/linux-headers-%s/include/linux/stand-in.h" % kernel: ("/* kernel headers stand-in */\n", 0o644),
        "/usr/src/linux-headers-%s/Makefile" % kernel: ("# kernel headers stand-in\n", 0o644),
    }, arch="amd64", scripts={"postinst": "#!/bin/sh\nset -e\nmkdir -p /lib/modules/%s\n"
                                          "ln -sfn /usr/src/linux-headers-%s /lib/modules/%s/build\n" % (kernel, kernel, kernel),
                              "postrm": "#!/bin/sh\nrm -f /lib/modules/%s/build\n" % kernel},
        description="Header files of the running kernel (stand-in)")
    newer = newer_kernel(kernel)
    build_deb(work, debian, "linux-image-%s" % newer, "%s-1" % newer.split("-")[0], {
        "/boot/vmlinuz-%s" % newer: ("kernel image stand-in %s\n" % newer, 0o644),
        "/lib/modules/%s/modules.order" % newer: ("", 0o644),
    }, arch="amd64", scripts={"postinst": "#!/bin/sh\nset -e\n# as Debian's kernel packages: the hooks (dkms autoinstall)\n"
                                          "run-parts --report --exit-on-error --arg=%s --arg=/boot/vmlinuz-%s "
                                          "/etc/kernel/postinst.d\n" % (newer, newer)},
        description="Linux kernel image %s (stand-in, no headers in this mirror)" % newer)
    flat_repo(debian, home, distro_fpr, "Debian", "Debian mirror stand-in")
    updates = mirror / "debian-updates"
    shutil.rmtree(updates, ignore_errors=True)
    for name in stacks.RDMA_CORE_PACKAGES:
        reversion_deb(debian_debs[name], updates, work, "1:44.0-2+hpcnet1")
    flat_repo(updates, home, distro_fpr, "Debian", "Debian updates stand-in")

    sums = []
    for path in sorted(mirror.rglob("*")):
        if path.is_file() and (path.suffix in (".tgz", ".iso", ".pub", ".asc") or path.name.startswith("doca-host_")):
            sums.append("%s  %s\n" % (sha256(path), path.relative_to(mirror)))
    (out / "SHA256SUMS").write_text("".join(sums))
    (out / "kernels").write_text("running=%s\nnewer=%s\n" % (kernel, newer))


def stamp_of(kernel: str) -> str:
    h = hashlib.sha256(kernel.encode())
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--kernel", default=os.uname().release,
                        help="release of the kernel the simulated hosts run (default: this machine's)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    stamp = stamp_of(args.kernel)
    if (out / "stamp").is_file() and (out / "stamp").read_text() == stamp:
        print("vendor artifacts in %s are up to date" % out)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory():
        build(out, args.kernel)
    (out / "stamp").write_text(stamp)
    print("built vendor artifacts in %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
