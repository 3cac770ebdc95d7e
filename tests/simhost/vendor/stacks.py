"""The vendor stacks the test bed builds stand-ins of: versions, package names and version strings.

One place for every number the stand-ins print, so the builder, the simulated tools and the tests agree.
NVIDIA's naming, from its documentation and real captures (tests/fixtures/real/ib-stack, SOURCES.md):
  * DOCA-Host online repository: <mirror>/public/repo/doca/<doca version>/<distro>/<arch>/ (a flat apt repository,
    "deb [signed-by=...] URL ./"), key <mirror>/public/repo/doca/GPG-KEY-Mellanox.pub;
  * DOCA-Host local-repo package: doca-host_<doca version>-<build>-<ofed yy.mm>-<distro>_<deb arch>.deb, which
    installs a file repository under /usr/share/doca-host-<doca version>-<build>-<ofed yy.mm>-<distro>/repo;
  * MLNX_OFED: MLNX_OFED_LINUX-<version>-<distro>-<arch>.tgz (and .iso) holding mlnxofedinstall, uninstall.sh and
    DEBS/; ofed_info -s prints OFED-internal-<version>: (DOCA) or MLNX_OFED_LINUX-<version>: (after mlnxofedinstall);
  * the DKMS module is mlnx-ofed-kernel/<yy.mm>.OFED.<version, dots>.1 (dkms-build-fail-01.txt), the modules carry
    MODULE_VERSION <version without its last field> (modinfo version: 24.10-1.1.4).
The stand-in versions below are invented in that shape; none is claimed to be a real release's build number.
"""

DISTRO = "debian12"
ARCH = "x86_64"
DEB_ARCH = "amd64"

# DOCA 3.2 builds its kernel modules with DKMS on the host; both versions here are of that era (see README).
DOCA = {
    "3.2.0": {"ofed": "25.10-0.5.4.0", "build": "083000", "rdma_core": "2510mlnx58-1.2510054"},
    "3.2.1": {"ofed": "25.10-1.7.1.0", "build": "044000", "rdma_core": "2510mlnx58-1.2510071"},
}
MLNX_OFED = {
    "24.10-1.1.4.0": {"rdma_core": "2410mlnx54-1.2410114"},
    "24.10-2.1.8.0": {"rdma_core": "2410mlnx54-1.2410218"},
}
# The kernel the MLNX_OFED tarballs were "built for" (.supported_kernels): Debian 12's stock kernel, not the
# container's, so mlnxofedinstall needs --add-kernel-support here, as on any host with another kernel.
MLNX_OFED_BUILT_FOR = "6.1.0-18-amd64"

# Debian's rdma-core family, re-versioned as the vendor's (the real binaries, so the tools keep working).
RDMA_CORE_PACKAGES = ["rdma-core", "libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1", "libibumad3",
                      "libibmad5", "libibnetdisc5", "infiniband-diags"]
# What the vendor packages need from the distribution that a minimal image lacks: the air-gapped distro mirror.
DISTRO_DEPENDENCIES = ["udev", "libnl-3-200", "libnl-route-3-200", "pci.ids", "libpci3", "perftest"]
# What the image has installed that depends on the rdma-core family (libibverbs1, libibumad3, ...): removing a vendor
# stack (ofed_uninstall.sh) removes these too and the ofed role installs them again, so the air-gapped distro mirror
# carries them, as a site's mirror carries what its hosts run (measured: /var/log/apt/history.log of a DOCA upgrade
# in the ofed scenario).
SITE_PACKAGES = ["openmpi-bin", "libopenmpi3", "mpi-default-bin", "python3-mpi4py", "libfabric1", "libucx0",
                 "mstflint", "ibsim-utils", "libumad2sim0"]
DKMS_MODULE = "mlnx-ofed-kernel"
KERNEL_MODULES = ["mlx_compat", "mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_umad", "rdma_cm", "rdma_ucm",
                  "ib_ipoib"]

# DOCA profiles: the meta-packages NVIDIA documents, and what each pulls in here.
DOCA_PROFILES = {
    "doca-ofed": ["mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils", "ofed-scripts", "mlnx-tools", "perftest"]
                 + RDMA_CORE_PACKAGES,
    "doca-roce": ["mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils", "ofed-scripts", "mlnx-tools"]
                 + RDMA_CORE_PACKAGES,
    "doca-networking": ["doca-ofed", "doca-networking-userspace"],
    "doca-all": ["doca-networking", "doca-all-userspace"],
}


def ofed_short(ofed_version):
    """25.10-1.7.1.0 -> 25.10 (the yy.mm in local-repo names and DKMS versions)."""
    return ofed_version.split("-", 1)[0]


def dkms_version(ofed_version):
    """25.10-1.7.1.0 -> 25.10.OFED.25.10.1.7.1.1 (the DKMS module version of mlnx-ofed-kernel)."""
    return "%s.OFED.%s.1" % (ofed_short(ofed_version), ofed_version.replace("-", ".").rsplit(".", 1)[0])


def module_version(ofed_version):
    """25.10-1.7.1.0 -> 25.10-1.7.1 (MODULE_VERSION of the modules, /sys/module/<m>/version)."""
    return ofed_version.rsplit(".", 1)[0]


def package_version(ofed_version):
    """Debian version of the vendor's own packages (ofed-scripts, mlnx-ofed-kernel-*)."""
    return dkms_version(ofed_version)


def local_repo_name(doca_version):
    info = DOCA[doca_version]
    return "doca-host-%s-%s-%s-%s" % (doca_version, info["build"], ofed_short(info["ofed"]), DISTRO)


def local_repo_deb(doca_version):
    info = DOCA[doca_version]
    return "doca-host_%s-%s-%s-%s_%s.deb" % (doca_version, info["build"], ofed_short(info["ofed"]), DISTRO, DEB_ARCH)


def mlnx_ofed_name(version):
    return "MLNX_OFED_LINUX-%s-%s-%s" % (version, DISTRO, ARCH)
