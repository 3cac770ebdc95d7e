# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which ConnectX card gets which firmware parameters: the firmware role's ``firmware_mlxconfig`` entries matched
against RDMA facts, and the reboot reasons reported from the mlxconfig module's results.

A card is the set of PCI functions of one PCI domain:bus:device; its non-volatile configuration is shared by all
its functions (function N-1 drives port N, the ``_P<N>`` parameters). Pure Python, used by the filter plugin.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware.mlxconfig import check_params, normalize, split_value
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.pci import PCI_RE, canonical_pci, pci_matches
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import ROLE_SELECTOR, ROLES, selectors_of

__metaclass__ = type

_PORT_SUFFIX = re.compile(r"_P(\d+)(\[\d+\])?$")


class SelectError(Exception):
    pass


def cards(devices):
    """RDMA devices (``ansible_facts.rdma.devices``) grouped per card, in PCI order: ``[{pci, devices: [names in
    function order], functions: {pci: name}, board_id}]``. Devices without a PCI address (rxe, siw) have no card."""
    by_card = {}
    for name, dev in sorted((devices or {}).items()):
        pci = canonical_pci((dev or {}).get("pci_address") if isinstance(dev, dict) else None)
        if not pci:
            continue
        by_card.setdefault(pci.rsplit(".", 1)[0], []).append((pci, name, dev))
    out = []
    for key in sorted(by_card):
        fns = sorted(by_card[key])
        roles = sorted(set(port.get("role") for _pci, _name, dev in fns for port in (dev.get("ports") or {}).values()
                           if isinstance(port, dict) and port.get("role")))
        out.append({"pci": fns[0][0], "devices": [name for _pci, name, _dev in fns],
                    "functions": dict((pci, name) for pci, name, _dev in fns), "board_id": fns[0][2].get("board_id"),
                    "part_number": fns[0][2].get("part_number"), "roles": roles})
    return out


def _part_number(info):
    """The part number of a card from the tool's ``Name:`` line (MCX755106AS-HEAT_Ax -> MCX755106AS-HEAT)."""
    name = ((info or {}).get("name") or "").strip()
    return re.sub(r"_A[A-Za-z0-9]*$", "", name) if name and name != "N/A" else None


def selector_matches(selector, card, info=None):
    """True when one selector string picks ``card``: ``all``, a PCI address (a function or, without ``.F``, the
    card), an RDMA device name, a part number (case-insensitive, with or without the ``_Ax`` suffix), a PSID
    (``board_id``) or ``role:<port role>`` (a card with a port of that role in ``rdma_port_roles``' plan)."""
    text = str(selector).strip()
    if text.lower() == "all":
        return True
    if text.lower().startswith(ROLE_SELECTOR):
        return text[len(ROLE_SELECTOR):].strip().lower() in card.get("roles", [])
    if PCI_RE.match(text):
        return any(pci_matches(text, pci) for pci in card["functions"])
    if text in card["devices"]:
        return True
    if card.get("board_id") and text.upper() == str(card["board_id"]).upper():
        return True
    part = _part_number(info) or card.get("part_number")
    return bool(part) and text.upper() in (part.upper(), ((info or {}).get("name") or "").upper())


def check_entries(entries):
    """Errors of ``firmware_mlxconfig`` itself (shape, selectors, parameter names and value types)."""
    errors = []
    if not isinstance(entries, list):
        return ["firmware_mlxconfig must be a list of {devices, params}, got %s" % type(entries).__name__]
    for index, entry in enumerate(entries):
        where = "firmware_mlxconfig[%d]" % index
        if not isinstance(entry, dict) or set(entry) != {"devices", "params"}:
            errors.append("%s must be a map with keys devices and params, got %r" % (where, entry))
            continue
        selectors = selectors_of(entry)
        if not selectors or any(not isinstance(sel, str) or not sel.strip() for sel in selectors):
            errors.append("%s.devices must be all, or PCI addresses, RDMA device names, part numbers, PSIDs or "
                          "role:<port role> (strings), got %r" % (where, entry["devices"]))
        else:
            errors.extend("%s.devices: %s names no port role; use role:%s" % (where, sel, "|role:".join(ROLES))
                          for sel in selectors if sel.strip().lower().startswith(ROLE_SELECTOR)
                          and sel.strip()[len(ROLE_SELECTOR):].strip().lower() not in ROLES)
        errors.extend("%s.%s" % (where, error) for error in check_params(entry.get("params", {})))
    return errors


def targets(devices, entries, infos=None):
    """Per card, the parameters every matching entry asks for (later entries win for the same parameter):
    ``[{pci, devices, params, entries: [indexes]}]``, only cards with parameters. ``infos`` maps a card's PCI address
    to the tool's device header (for part-number selectors)."""
    errors = check_entries(entries)
    if errors:
        raise SelectError("; ".join(errors))
    out = []
    for card in cards(devices):
        params, matched = {}, []
        for index, entry in enumerate(entries):
            selectors = selectors_of(entry)
            if any(selector_matches(sel, card, (infos or {}).get(card["pci"])) for sel in selectors):
                params.update(entry.get("params") or {})
                matched.append(index)
        if params:
            out.append({"pci": card["pci"], "devices": card["devices"], "params": params, "entries": matched})
    return out


def unmatched_selectors(devices, entries, infos=None):
    """``firmware_mlxconfig[i].devices: selector`` texts of selectors that pick no card on this host."""
    out = []
    for index, entry in enumerate(entries or []):
        for selector in selectors_of(entry):
            if not any(selector_matches(selector, card, (infos or {}).get(card["pci"])) for card in cards(devices)):
                out.append("firmware_mlxconfig[%d].devices: %s" % (index, selector))
    return out


def missing_params(targets, reads):
    """Parameters a selected card does not show (checked for every card before any is written, so that one card
    without the parameter does not leave another one changed)."""
    configs = dict((read.get("device"), read.get("config") or {}) for read in reads or [] if read.get("device"))
    out = []
    for target in targets or []:
        config = configs.get(target["pci"])
        if config is None:
            continue
        for name in sorted(target["params"]):
            base = re.sub(r"\[\d+\]$", "", name)
            if name not in config and not (base != name and base in config):
                out.append("%s (%s) has no parameter %s" % (", ".join(target["devices"]), target["pci"], name))
    return out


def reboot_reasons(results, devices):
    """``rdma_reboot_reasons`` from mlxconfig module results: ``[{device, pci, card, parameter, from, to}]``; device
    and pci are the RDMA device and PCI function of the port a ``_P<N>`` parameter belongs to, else the card's first;
    card is the card's PCI address (its function 0, which the tool was called with)."""
    by_pci = dict((card["pci"], card) for card in cards(devices))
    out = []
    for result in results or []:
        pci = result.get("device")
        card = by_pci.get(pci) or {"devices": [], "functions": {}}
        for name, value in sorted((result.get("pending") or {}).items()):
            device, fn_pci = (card["devices"][0] if card["devices"] else pci), pci
            port = _PORT_SUFFIX.search(name)
            port_pci = "%s.%d" % (pci.rsplit(".", 1)[0], int(port.group(1)) - 1) if port else None
            if port_pci in card["functions"]:
                device, fn_pci = card["functions"][port_pci], port_pci
            printed = value.get("printed") or {}
            out.append({"device": device, "pci": fn_pci, "card": pci, "parameter": name,
                        "from": printed.get("current", value.get("current")),
                        "to": printed.get("next_boot", value.get("next_boot"))})
    return out


def after_reboot(before, results):
    """Compare the reasons recorded before a reboot with fresh mlxconfig reads: ``{"current": ["mlx5_1 LINK_TYPE_P2
    IB(1)", ...], "not_applied": ["mlx5_1 LINK_TYPE_P2 is ETH(2), expected IB(1) (next boot IB(1))", ...]}``."""
    by_pci = dict((result.get("device"), result) for result in results or [] if result.get("device"))
    current, not_applied = [], []
    for reason in before or []:
        if reason.get("kind") in ("driver", "naming"):  # the ofed role checks the driver and the device names
            continue
        result = by_pci.get(reason.get("card", reason["pci"]))
        row = ((result or {}).get("config") or {}).get(reason["parameter"])
        want = normalize(str(reason["to"]))
        if row is None:
            not_applied.append("%s %s was not read back" % (reason["device"], reason["parameter"]))
            continue
        symbol = split_value(str(reason["to"]))[0]
        shown = "%s(%s)" % (symbol, row["current"]) if symbol and row["current"] == want else str(row["current"])
        if row["current"] == want:
            current.append("%s %s %s" % (reason["device"], reason["parameter"], shown))
        else:
            not_applied.append("%s %s is %s, expected %s (next boot %s)" % (
                reason["device"], reason["parameter"], row["current"], reason["to"], row["next_boot"]))
    return {"current": current, "not_applied": not_applied}
