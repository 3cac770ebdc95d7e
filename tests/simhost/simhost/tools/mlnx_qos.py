"""Fake ``mlnx_qos`` (mlnx-tools python/mlnx_qos, the netlink variant current MLNX_OFED/DOCA ship) on simhost.

It talks to the simulated driver (simhost.qos) where the real tool talks dcbnl netlink, and follows the real
tool's order of work and messages: options are applied one after the other (PFC and cable length first, then
dscp2prio, default priority, trust, buffers, rate limits, ETS), errors are printed on stdout and exit 1, a
failing setting leaves the earlier ones applied, and the report of the final state is printed last.
Format of the newest mlnx_qos (``default priority:`` block, ``max_buffer_size=``, TCs sorted): the line layout
is checked byte for byte against tests/fixtures/real/*/mlnx_qos-*.txt in tests/unit/simhost.

Kernel-side behaviour comes from the model: trust is "dscp" exactly while DSCP app entries exist (the tool
counts them), ``--trust dscp`` adds the 64 default entries (dscp -> dscp >> 3), the app table lists the newest
entry first (hence ``prio:0 dscp:07,06,...,00``), an ETS bandwidth sum other than 100 is refused.
Known difference: ``-h`` prints a shortened help text.
"""

from __future__ import annotations

import errno
# the real tool uses optparse: same error messages
import optparse  # pylint: disable=deprecated-module
import os
import sys

from .. import kernelfs, qos

USAGE = "%prog -i <interface> [options]"


class _Exit(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _netlink_error(code: int) -> OSError:
    err = OSError("Netlink error: %s (%d)" % (os.strerror(code), code))
    err.errno = code
    return err


def _bad_value() -> OSError:
    return OSError("Netlink error: Bad value. see dmesg.")


class Ctrl:
    """dcbnetlink.DcbController over the simulated driver."""

    def __init__(self, intf: str):
        self.intf = intf
        self.kind = qos.netdev_kind(intf)

    def _state(self) -> dict:
        if self.kind is None:
            raise _netlink_error(errno.ENODEV)
        if self.kind != "mlx5":
            raise _netlink_error(errno.EOPNOTSUPP)
        return qos.load(self.intf)

    def _apply(self, op, *args) -> None:
        st = self._state()
        if op(st, *args):
            raise _bad_value()
        qos.save(self.intf, st)

    def get_dcbx(self):
        return self._state()["dcbx"]

    def set_dcbx(self, mode):
        self._apply(qos.setdcbx, mode)

    def get_ieee_pfc_en(self):
        return self._state()["pfc_en"]

    def get_ieee_pfc_delay(self):
        return self._state()["cable_len"]

    def set_ieee_pfc(self, pfc_en, delay):
        self._apply(qos.setpfc, pfc_en, delay)

    def get_ieee_ets(self):
        ets = self._state()["ets"]
        return list(ets["prio_tc"]), list(ets["tc_tsa"]), list(ets["tc_bw"])

    def set_ieee_ets(self, prio_tc, tsa, tc_bw):
        self._apply(qos.setets, prio_tc, tsa, tc_bw)

    def get_ieee_dcb_buffer(self):
        buf = self._state()["buffer"]
        return list(buf["prio2buffer"]), list(buf["buffer_size"]), buf["total_size"]

    def set_dcb_buffer(self, prio2buffer, buffer_size):
        self._apply(qos.setbuffer, prio2buffer, buffer_size)

    def get_ieee_maxrate(self):
        return list(self._state()["maxrate_kbps"])

    def set_ieee_maxrate(self, rates):
        self._apply(qos.setmaxrate, rates)

    def get_ieee_app_table(self):
        return [tuple(a) for a in self._state()["apps"]]

    def set_ieee_app(self, selector, priority, protocol):
        self._apply(qos.setapp, selector, priority, protocol)

    def del_ieee_app(self, selector, priority, protocol):
        self._apply(qos.delapp, selector, priority, protocol)


def _parser() -> optparse.OptionParser:
    p = optparse.OptionParser(usage=USAGE, version="%prog 1.2", prog="mlnx_qos")
    p.add_option("-f", "--pfc", dest="pfc", metavar="LIST", help="PFC per priority, 8 comma separated 0/1")
    p.add_option("-F", "--specific_pfc", dest="specific_pfc", metavar="LIST",
                 help="PFC for some priorities, x keeps the current state; silent")
    p.add_option("-P", "--get_pfc", dest="get_pfc", help="print the PFC state of one priority")
    p.add_option("-p", "--prio_tc", dest="prio_tc", metavar="LIST", help="priority to TC map, 8 TC numbers")
    p.add_option("-s", "--tsa", dest="tsa", metavar="LIST", help="TSA per TC: strict, ets or vendor")
    p.add_option("-t", "--tcbw", dest="tc_bw", metavar="LIST", help="ETS bandwidth percent per TC")
    p.add_option("-r", "--ratelimit", dest="ratelimit", metavar="LIST", help="rate limit per TC in Gbps")
    p.add_option("-d", "--dcbx", dest="dcbx", help="dcbx mode: fw or os")
    p.add_option("--trust", dest="trust", help="priority trust state: pcp or dscp")
    p.add_option("--dscp2prio", dest="dscp2prio", action="append", help="set,DSCP,PRIO / del,DSCP,PRIO / flush")
    p.add_option("--defltprio", dest="defltprio", help="set,PRIO / del,PRIO")
    p.add_option("--cable_len", dest="cable_len", help="cable length for the buffer thresholds")
    p.add_option("--prio2buffer", dest="prio2buffer", metavar="LIST", help="priority to receive buffer map")
    p.add_option("--buffer_size", dest="buffer_size", metavar="LIST", help="receive buffer sizes in bytes")
    p.add_option("-i", "--interface", dest="intf", help="Interface name")
    p.add_option("-a", action="store_true", dest="printall", default=False, help="Show all interface's TCs")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    kernelfs.settle()
    try:
        return _run(argv[1:])
    except _Exit as done:
        return done.code


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _run(args: list) -> int:  # noqa: C901  (one linear pass over the options, as the real tool)
    parser = _parser()
    options, rest = parser.parse_args(args)

    def usage_exit():
        parser.print_usage(sys.stdout)
        raise _Exit(1)

    def parse_int(text, lo, hi, what):
        try:
            val = int(text)
            if val < lo or val > hi:
                raise ValueError("%d is not in the range %d..%d" % (val, lo, hi))
            return val
        except ValueError as exc:
            _say("Bad value for %s: %s" % (what, exc))
            usage_exit()
        return None

    if rest:
        _say("Bad arguments")
        usage_exit()
    if options.intf is None:
        _say("Interface name is required")
        usage_exit()
    ctrl = Ctrl(options.intf)

    # dcbx mode
    if options.dcbx is not None:
        if options.dcbx == "os":
            ctrl.set_dcbx(ctrl.get_dcbx() | qos.DCBX_HOST)
        elif options.dcbx == "fw":
            ctrl.set_dcbx(0)
        elif options.dcbx != "get":
            _say("Invalid dcbx mode command. Refer to the help.")
            return 1

    # cable length, PFC
    if options.cable_len:
        delay = parse_int(options.cable_len, 0, 0xFFFF, "cable_len")
        pfc_en = ctrl.get_ieee_pfc_en()
        try:
            ctrl.set_ieee_pfc(pfc_en, delay)
        except OSError as exc:
            _say("mlnx_qos: Error setting pfc delay:" + exc)  # noqa  (TypeError, as the real tool raises)
    if options.get_pfc:
        bits = list(bin(ctrl.get_ieee_pfc_en())[2:].zfill(8))[::-1]
        index = int(options.get_pfc)
        if index not in range(0, 8):
            _say("pfc index must be in range of 0-7")
            return 1
        _say(bits[index])
        return 0
    if options.specific_pfc:
        bits = list(bin(ctrl.get_ieee_pfc_en())[2:].zfill(8))
        wanted = options.specific_pfc.split(",")[::-1]
        if len(wanted) != 8:
            _say("pfc list must have 8 items")
            return 1
        for i, val in enumerate(wanted):
            if val != "x":
                if val not in ("0", "1"):
                    _say("Bad value for 'PFC': %s" % val)
                    return 1
                bits[i] = val
        try:
            ctrl.set_ieee_pfc(int("".join(bits), 2), ctrl.get_ieee_pfc_delay())
        except OSError as exc:
            _say("mlnx_qos: Error setting pfc:" + exc)  # noqa
        return 0
    if options.pfc:
        pfc_en = 0
        count = 0
        for tok in options.pfc.split(","):
            if count >= 8:
                _say("Too many items for PFC")
                return 1
            pfc_en |= parse_int(tok, 0, 1, "PFC") << count
            count += 1
        if count != 8:
            _say("pfc list must have 8 items")
            return 1
        try:
            ctrl.set_ieee_pfc(pfc_en, ctrl.get_ieee_pfc_delay())
        except OSError as exc:
            _say("mlnx_qos: Error setting pfc:" + exc)  # noqa

    # dscp2prio
    if options.dscp2prio and options.trust:
        _say("trust and dscp2prio commands cannot be used at the same time.")
        return 1
    actions = []
    try:
        for opt in options.dscp2prio or []:
            if opt == "flush":
                actions.append((opt, None, None))
                continue
            action, dscp, prio = opt.split(",")
            dscp, prio = int(dscp), int(prio)
            if action not in ("set", "del") or dscp > 63 or prio > 7:
                raise ValueError(opt)
            actions.append((action, dscp, prio))
    except ValueError:
        _say("Invalid dscp2prio command. Refer to the help.")
        return 1
    try:
        for action, dscp, prio in actions:
            if action == "set":
                ctrl.set_ieee_app(qos.SEL_DSCP, prio, dscp)
            elif action == "del":
                ctrl.del_ieee_app(qos.SEL_DSCP, prio, dscp)
            else:
                for sel, app_prio, proto in ctrl.get_ieee_app_table():
                    if sel == qos.SEL_DSCP:
                        ctrl.del_ieee_app(sel, app_prio, proto)
        apps = ctrl.get_ieee_app_table()
    except Exception:  # pylint: disable=broad-except
        if options.dscp2prio:
            _say("dscp2prio command failed")
            return 1
        apps = []

    # default priority
    try:
        if options.defltprio:
            action, prio = options.defltprio.split(",")
            prio = int(prio)
            if action not in ("set", "del") or not 0 <= prio <= 7:
                raise ValueError(options.defltprio)
    except ValueError:
        _say("Invalid defltprio command. Refer to the help.")
        return 1
    try:
        if options.defltprio:
            if action == "set":
                ctrl.set_ieee_app(qos.SEL_ETHERTYPE, prio, 0)
            else:
                ctrl.del_ieee_app(qos.SEL_ETHERTYPE, prio, 0)
        apps = ctrl.get_ieee_app_table()
    except Exception:  # pylint: disable=broad-except
        if options.defltprio:
            _say("defltprio command failed")
            return 1
        apps = []

    # trust
    if options.trust and options.trust not in ("dscp", "pcp"):
        _say("Invalid trust state command. Refer to the help.")
        return 1
    try:
        trust = "dscp" if any(a[0] == qos.SEL_DSCP for a in ctrl.get_ieee_app_table()) else "pcp"
        if options.trust and options.trust != trust:
            if options.trust == "pcp":
                for sel, app_prio, proto in ctrl.get_ieee_app_table():
                    if sel == qos.SEL_DSCP:
                        ctrl.del_ieee_app(sel, app_prio, proto)
            else:
                for dscp in range(64):
                    ctrl.set_ieee_app(qos.SEL_DSCP, dscp >> 3, dscp)
        if options.trust:
            trust = "dscp" if any(a[0] == qos.SEL_DSCP for a in ctrl.get_ieee_app_table()) else "pcp"
            apps = ctrl.get_ieee_app_table()
    except Exception:  # pylint: disable=broad-except
        _say("Priority trust state is not supported on your system")
        if options.trust:
            return 1
        trust = "none"

    # buffers
    buffer_error = False
    try:
        prio2buffer, buffer_size, tot_size = ctrl.get_ieee_dcb_buffer()
    except Exception:  # pylint: disable=broad-except
        buffer_error = True
        prio2buffer, buffer_size, tot_size = [0] * 8, [0] * 8, None
        _say("Buffers commands are not supported on your system")
        if options.buffer_size or options.prio2buffer:
            return 1
    try:
        if options.prio2buffer:
            for i, tok in enumerate(options.prio2buffer.split(",")):
                if i >= 8:
                    _say("Too many items for prio2buffer")
                    raise _Exit(1)
                prio2buffer[i] = parse_int(tok, 0, 7, "prio buffer")
        if options.buffer_size:
            for i, tok in enumerate(options.buffer_size.split(",")):
                if i >= 8:
                    _say("Too many items for buffer_size")
                    raise _Exit(1)
                buffer_size[i] = int(tok)
        if options.buffer_size or options.prio2buffer:
            ctrl.set_dcb_buffer(prio2buffer, buffer_size)
            prio2buffer, buffer_size, tot_size = ctrl.get_ieee_dcb_buffer()
    except (OSError, ValueError, _Exit):      # the real tool's bare except also catches its own sys.exit()
        buffer_error = True
        if options.buffer_size or options.prio2buffer:
            _say("Buffers commands error")
            return 1

    # rate limits (Gbps on the command line, kbps in the kernel)
    ratelimit = []
    if options.ratelimit:
        rates = []
        for i, tok in enumerate(options.ratelimit.split(",")):
            if i >= 8:
                _say("Too many items for ratelimit")
                return 1
            rates.append(parse_int(tok, 0, 1000000, "ratelimit") * 1000 * 1000)
        if len(rates) != 8:
            _say("ratelimit must have 8 items")
            return 1
        try:
            ctrl.set_ieee_maxrate(rates)
        except OSError:
            _say("Rate limit is not supported on your system!")
    try:
        ratelimit = ctrl.get_ieee_maxrate()
    except OSError:
        _say("Rate limit is not supported on your system!")

    try:
        prio_tc, tsa, tc_bw = ctrl.get_ieee_ets()
        pfc_en = ctrl.get_ieee_pfc_en()
        pfc_delay = ctrl.get_ieee_pfc_delay()
    except OSError:
        _say("ETS features are not supported on your system")
        return 1

    # ETS
    names = {"strict": qos.TSA_STRICT, "ets": qos.TSA_ETS, "vendor": qos.TSA_VENDOR}
    if options.tsa:
        count = 0
        for tok in options.tsa.split(","):
            if count >= 8:
                _say("Too many items for TSA")
                return 1
            if tok not in names:
                _say(str(("Bad TSA value: ", tok)))
                usage_exit()
            tsa[count] = names[tok]
            count += 1
        if count != 8:
            _say("tsa list must have 8 items")
            return 1
    if options.tc_bw:
        count = 0
        for tok in options.tc_bw.split(","):
            if count >= 8:
                _say("Too many items for ETS BW")
                return 1
            bw = parse_int(tok, 0, 100, "ETS BW")
            if tsa[count] != qos.TSA_ETS and bw != 0:
                _say("ETS BW for a strict/vendor TC must be 0")
                usage_exit()
            tc_bw[count] = bw
            count += 1
        if count != 8:
            _say("tcbw list must have 8 items")
            return 1
    if options.prio_tc:
        count = 0
        for tok in options.prio_tc.split(","):
            if count >= 8:
                _say("Too many items in UP => TC mapping")
                return 1
            prio_tc[count] = parse_int(tok, 0, 7, "UP => TC mapping")
            count += 1
        if count != 8:
            _say("prio_tc list must have 8 items")
            return 1
    if options.tsa or options.tc_bw or options.prio_tc:
        try:
            ctrl.set_ieee_ets(prio_tc, tsa, tc_bw)
        except OSError as exc:
            _say(str(exc))
            return 1

    sys.stdout.write(report(ctrl.get_dcbx(), trust, apps, buffer_error, buffer_size, tot_size, prio2buffer,
                            pfc_en, pfc_delay, prio_tc, tsa, tc_bw, ratelimit, options.printall))
    return 0


def _dscp_lines(apps: list) -> str:
    """printAppSelector: per priority, the DSCPs in app-table order, 8 per line (24 characters)."""
    per_prio = [""] * 8
    for sel, prio, proto in apps:
        if sel == qos.SEL_DSCP:
            per_prio[prio] += "%02d," % proto
    out = ""
    for prio in range(8):
        rest = per_prio[prio]
        lead = "\tprio:%d dscp:" % prio
        while len(rest) > 24:
            out += lead + rest[:24] + "\n"
            rest = rest[24:]
        if rest:
            out += lead + rest + "\n"
    return out


def report(dcbx, trust, apps, buffer_error, buffer_size, tot_size, prio2buffer, pfc_en, pfc_delay, prio_tc, tsa,
           tc_bw, ratelimit, printall=False) -> str:
    """The report mlnx_qos prints last (pretty_print of the netlink variant)."""
    out = "DCBX mode: %s\n" % ("OS controlled" if dcbx & qos.DCBX_HOST else "Firmware controlled")
    out += "Priority trust state: %s\n" % trust
    if trust == "dscp":
        out += "dscp2prio mapping:\n" + _dscp_lines(apps)
    out += "default priority:\n"
    out += "".join("\tprio:%d\n" % prio for sel, prio, _proto in apps if sel == qos.SEL_ETHERTYPE)
    if not buffer_error:
        line = "Receive buffer size (bytes): " + "".join("%1d," % buffer_size[b] for b in range(8))
        if tot_size is not None:
            line += "max_buffer_size=%d" % tot_size
        out += line + "\n"
    out += "Cable len: %d\n" % pfc_delay
    out += "PFC configuration:\n"
    out += "\tpriority    0   1   2   3   4   5   6   7\n"
    out += "\tenabled     " + "".join("%1d   " % ((pfc_en >> p) & 1) for p in range(8))
    if not buffer_error:
        out += "\n\tbuffer      " + "".join("%1d   " % prio2buffer[p] for p in range(8))
    out += "\n"
    tc2up: dict = {}
    if printall:
        for tc in range(8):
            tc2up.setdefault(tc, [])
    for up, tc in enumerate(prio_tc):
        tc2up.setdefault(int(tc), []).append(up)
    for tc in sorted(tc2up):
        rate = "unlimited"
        if tc < len(ratelimit) and ratelimit[tc] > 0:
            rate = "%.1f Gbps" % (float(ratelimit[tc] / 1000) / 1000)
        line = "tc: %d ratelimit: %s, tsa: " % (tc, rate)
        if tsa[tc] == qos.TSA_ETS:
            line += "ets, bw: %s%%" % tc_bw[tc]
        elif tsa[tc] == qos.TSA_STRICT:
            line += "strict"
        elif tsa[tc] == qos.TSA_VENDOR:
            line += "vendor"
        else:
            line += "unknown"
        out += line + "\n"
        out += "".join("\t priority:  %s\n" % up for up in tc2up[tc])
    return out
