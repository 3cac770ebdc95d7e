# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Error output of the RoCE QoS tools: mlnx_qos, dcb (iproute2), ethtool and the mlnx-tools cma_roce_mode /
cma_roce_tos scripts.

Owns the error tables (one regex table per tool, written from the tools' own messages: mlnx-tools ``mlnx_qos``,
iproute2 ``dcb/*.c``, ethtool ``netlink/*.c``, the cma_roce_* shell scripts), the one matcher that runs a table
over a tool's text (:func:`match_error_lines`) and the errno decoding of the strerror text the tools print.
Pure Python (no Ansible imports); lines that fit no row are ignored, never raised on.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# strerror() text -> errno name, for the messages dcb/ethtool/mlnx_qos print
_ERRNO_NAMES = {
    "Success": None, "Operation not permitted": "EPERM", "No such file or directory": "ENOENT",
    "No such device": "ENODEV", "Invalid argument": "EINVAL", "File exists": "EEXIST",
    "Operation not supported": "EOPNOTSUPP", "Device or resource busy": "EBUSY", "Permission denied": "EACCES",
    "Numerical result out of range": "ERANGE", "No data available": "ENODATA",
}
# errno numbers (Linux) for the bogus "Unknown error N" (N = u8 of -errno) printed by iproute2 <= 5.16
_ERRNO_BY_NUMBER = {1: "EPERM", 2: "ENOENT", 16: "EBUSY", 17: "EEXIST", 19: "ENODEV", 22: "EINVAL", 34: "ERANGE",
                    95: "EOPNOTSUPP", 61: "ENODATA"}


def _errno_name(text):
    text = (text or "").strip()
    if text in _ERRNO_NAMES:
        return _ERRNO_NAMES[text]
    m = re.match(r"^Unknown error (\d+)$", text)
    if m:
        num = int(m.group(1))
        return _ERRNO_BY_NUMBER.get(256 - num if num > 127 else num)
    return None


def match_error_lines(table, text):
    """The lines of a tool's ``text`` that a row of an error ``table`` matches, in output order.

    ``table``: rows ``(compiled regex, kind)`` or ``(compiled regex, kind, {field: value})``, tried in order on each
    stripped, non-blank line; the first row that matches wins and lines no row matches are skipped. Returns
    [{kind, message (the stripped line), <the regex's named groups that matched>, <the row's fields>}].
    """
    out = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        for row in table:
            m = row[0].match(line)
            if m:
                entry = {"kind": row[1], "message": line}
                entry.update(dict((k, v) for k, v in m.groupdict().items() if v is not None))
                if len(row) > 2:
                    entry.update(row[2])
                out.append(entry)
                break
    return out


# ------------------------------------------------------------------------------------------------- mlnx_qos
MLNX_QOS_UNSUPPORTED = (
    ("Priority trust state is not supported on your system", "trust"),
    ("Buffers commands are not supported on your system", "buffers"),
    ("Rate limit is not supported on your system!", "ratelimit"),
    ("ETS features are not supported on your system", "ets"),
)
_MLNX_QOS_ERRORS = (
    (re.compile(r"^Bad value for (?P<option>.+?): (?P<detail>.*)$"), "bad_value"),
    (re.compile(r"^(?P<option>pfc|tsa|tcbw|prio_tc|ratelimit) list must have 8 items$"), "list_length"),
    (re.compile(r"^Too many items (?:for|in) (?P<option>.+)$"), "list_length"),
    (re.compile(r"^trust and dscp2prio commands cannot be used at the same time\.$"), "conflict"),
    (re.compile(r"^Invalid (?P<option>trust state|dscp2prio|defltprio|dcbx mode) command\. Refer to the help\.$"),
     "invalid_command"),
    (re.compile(r"^(?P<option>dscp2prio|defltprio) command failed$"), "failed"),
    (re.compile(r"^Buffers commands error$"), "failed"),
    (re.compile(r"^Netlink error: (?P<detail>.*)$"), "netlink"),
    (re.compile(r"^mlnx_qos: Error setting (?P<option>pfc delay|pfc):\s*(?P<detail>.*)$"), "netlink"),
    (re.compile(r"^ETS BW for a strict/vendor TC must be 0$"), "bad_value"),
    (re.compile(r"^Bad TSA value:?\s*(?P<detail>.*)$"), "bad_value"),
    (re.compile(r"^\(?'Bad TSA value: ', '(?P<detail>[^']*)'\)?$"), "bad_value"),
    (re.compile(r"^pfc index must be in range of 0-7$"), "bad_value"),
    (re.compile(r"^Interface name is required$"), "usage"),
    (re.compile(r"^Bad arguments$"), "usage"),
    (re.compile(r"^Usage: \S+ -i <interface> \[options\]$"), "usage"),
    (re.compile(r"^\*+ WARNING: (?P<detail>.*?) \*+$"), "warning"),
    (re.compile(r"^(?P<detail>(?:[A-Za-z_]+Error|OSError|Exception): .*)$"), "exception"),
    (re.compile(r"^Traceback \(most recent call last\):$"), "exception"),
)
# the 'not supported' lines are exact messages, tried before the regexes
_MLNX_QOS_TABLE = tuple(
    (re.compile("^%s$" % re.escape(msg)), "unsupported", {"feature": feature}) for msg, feature in MLNX_QOS_UNSUPPORTED
) + _MLNX_QOS_ERRORS


def parse_mlnx_qos_errors(text):
    """Error, warning and 'not supported' lines of mlnx_qos (all printed on stdout, exit status 1).

    Returns [{kind, message, option?, detail?, feature?}] in output order; kind is one of unsupported (feature:
    trust|buffers|ratelimit|ets), bad_value, list_length, conflict (--trust with --dscp2prio), invalid_command,
    failed, netlink ("Netlink error: Bad value. see dmesg."), usage, warning (lldpad running), exception.
    """
    return match_error_lines(_MLNX_QOS_TABLE, text)


# ------------------------------------------------------------------------------------------------------ dcb
_DCB_ERRORS = (
    (re.compile(r"^Attribute read: (?P<detail>.*)$"), "attribute_read"),
    (re.compile(r"^Attribute write: (?P<detail>.*)$"), "attribute_write"),
    (re.compile(r"^Attribute not found: (?P<detail>.*)$"), "attribute_not_found"),
    (re.compile(r"^Error when attempting to set attribute: (?P<detail>.*)$"), "set_attribute"),
    (re.compile(r"^In (?P<key>\S+?):(?P<value>\S+) mapping, (?P<what>\S+) is expected to be (?P<range>\S+)$"),
     "mapping_range"),
    (re.compile(r"^Invalid (?P<what>.*?)\s*mapping (?P<detail>.*)$"), "invalid_mapping"),
    (re.compile(r"^What is \"(?P<detail>.*)\"\?$"), "unknown_keyword"),
    (re.compile(r"^Object \"(?P<detail>.*)\" is unknown$"), "unknown_object"),
    (re.compile(r"^Command line is not complete\. Try option \"help\"$"), "incomplete"),
    (re.compile(r"^dcb: (?:invalid|unrecognized) option.*$"), "invalid_option"),
    (re.compile(r"^Unknown option\.$"), "invalid_option"),
    (re.compile(r"^Invalid delay `(?P<detail>.*)', expected an integer 0\.\.65535$"), "bad_value"),
    (re.compile(r"^(?P<what>\S+) (?:argument|value) is invalid.*$"), "bad_value"),
    (re.compile(r"^Duplicate selector: (?P<detail>.*)$"), "bad_value"),
    (re.compile(r"^Invalid list of selectors$"), "bad_value"),
    (re.compile(r"^Could not (?:add new|remove replaced) APP entries$"), "replace_failed"),
    (re.compile(r"^Usage: dcb .*$"), "usage"),
)


def parse_dcb_errors(text):
    """Error lines dcb prints on stderr. Returns [{kind, message, detail?, errno?}] where kind is one of
    attribute_read / attribute_write / attribute_not_found (perror after a netlink request; errno is the errno
    name of the strerror text, e.g. ENODEV, EOPNOTSUPP, EEXIST), set_attribute (the pre-5.17 bogus
    "Unknown error 239" form; errno decoded from the u8), mapping_range, invalid_mapping, unknown_keyword,
    unknown_object (e.g. ``apptrust`` on iproute2 < 6.2), incomplete, invalid_option, bad_value,
    replace_failed, usage. Only the first line of each usage block is reported."""
    out = match_error_lines(_DCB_ERRORS, text)
    for entry in out:
        if entry["kind"] in ("attribute_read", "attribute_write", "attribute_not_found", "set_attribute"):
            entry["errno"] = _errno_name(entry.get("detail"))
    return out


# --------------------------------------------------------------------------------------------------- ethtool
_ETHTOOL_ERRORS = (
    (re.compile(r"^netlink error: no device matches name.*$"), "no_device"),
    (re.compile(r"^netlink error: (?P<detail>.*)$"), "netlink"),
    (re.compile(r"^Cannot get (?P<what>.+?): (?P<detail>.*)$"), "ioctl"),
    (re.compile(r"^Cannot set (?P<what>.+?): (?P<detail>.*)$"), "ioctl"),
    (re.compile(r"^no stats available$"), "no_stats"),
    (re.compile(r"^no pause parameters changed, aborting$"), "unchanged"),
    (re.compile(r"^ethtool \((?P<option>-\w)\): invalid value '(?P<value>.*)' for parameter '(?P<param>.*)'$"),
     "invalid_value"),
    (re.compile(r"^ethtool \((?P<option>-\w)\): unknown parameter '(?P<param>.*)'$"), "unknown_parameter"),
    (re.compile(r"^ethtool: bad command line argument\(s\)$"), "bad_args"),
)


def parse_ethtool_errors(text):
    """Error lines of ethtool (stderr). Returns [{kind, message, detail?, errno?, ...}]; kind is one of
    no_device, netlink (errno from the strerror text, e.g. EOPNOTSUPP), ioctl, no_stats, unchanged,
    invalid_value, unknown_parameter, bad_args."""
    out = match_error_lines(_ETHTOOL_ERRORS, text)
    for entry in out:
        if "detail" in entry:
            entry["errno"] = _errno_name(entry["detail"])
        if entry["kind"] == "no_device":
            entry["errno"] = "ENODEV"
    return out


# ------------------------------------------------------------------------------------ cma_roce_mode / cma_roce_tos
_CMA_ERRORS = (
    (re.compile(r"^Module rdma_cm is not loaded or does not support configfs$"), "no_configfs"),
    (re.compile(r"^Device (?P<device>\S+) port (?P<port>\S+) does not exist$"), "no_port"),
    (re.compile(r"^Failed to create configuration for (?P<device>\S+)$"), "mkdir_failed"),
    (re.compile(r"^You must be root to run this$"), "not_root"),
    (re.compile(r"^Failed to mount configfs$"), "no_configfs"),
    (re.compile(r"^mkdir: cannot create directory .*: (?P<detail>.*)$"), "mkdir_failed"),
    (re.compile(r"^.*: line \d+: (?:echo: )?write error: (?P<detail>.*)$"), "write_failed"),
    (re.compile(r"^.*: line \d+: \[: (?P<detail>.*): integer expression expected$"), "bad_value"),
)


def parse_cma_errors(text):
    """Error lines of the mlnx-tools cma_roce_mode / cma_roce_tos scripts (and of the shell running them).
    Returns [{kind, message, device?, port?, detail?}] in output order; kind is one of no_configfs, no_port,
    mkdir_failed, not_root, write_failed, bad_value."""
    return match_error_lines(_CMA_ERRORS, text)
