#!/bin/bash
# ofed_uninstall.sh stand-in (hpcnet.rdma test bed): removes every package of the vendor stack, as NVIDIA's does
# (its messages and exit codes: "Only root can run" 172, "No OFED installation detected. Exiting ..." 1).
PACKAGES="@PACKAGES@"
if [ "$(id -u)" != 0 ]; then echo "Only root can run $0"; exit 172; fi
if ! command -v ofed_info >/dev/null 2>&1; then echo "No OFED installation detected. Exiting ..."; exit 1; fi
force=no
for arg in "$@"; do
  case "$arg" in
    --force) force=yes ;;
    -h|--help) echo "Usage: $0 [--force]"; exit 0 ;;
    *) echo "Unsupported argument: $arg"; exit 22 ;;
  esac
done
echo "This program will uninstall all OFED packages on your machine."
if [ "$force" != yes ]; then
  read -r -p "Do you want to continue?[y/N]:" answer
  case "$answer" in y|Y|yes) ;; *) exit 1 ;; esac
fi
installed=$(dpkg-query -W -f='${db:Status-Status} ${Package}\n' $PACKAGES 2>/dev/null | awk '$1=="installed"{print $2}')
log=/tmp/ofed.uninstall.log
if [ -n "$installed" ]; then
  echo "Removing MLNX_OFED_LINUX Software installations"
  if ! DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y $installed >"$log" 2>&1; then
    echo "Failed to uninstall the previous installation"
    echo "See $log"
    exit 1
  fi
fi
echo "Uninstall finished successfully"
exit 0
