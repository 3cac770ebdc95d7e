# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hpcnet.rdma.firmware_config module's work: the firmware configuration of every ConnectX card of one host as
desired state, in one call (the firmware role's one module call).

* :func:`desired_state`: read every card before any is written, match the entries (``firmware_mlxconfig``) to the cards, refuse a
  parameter a selected card lacks before any card is written, then set each card through :func:`mlxconfig.configure`
  (which keeps the check-mode gate) and sum up what is pending for the next boot.

The rules live where they did: selectors, targets and reboot reasons in firmware_select.py, reading and setting a
card in mlxconfig.py. A card the tool refuses does not stop the others: it is returned in ``refused`` with what the
other cards now have pending, and the role fails the host after its report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware import firmware_select
from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware.mlxconfig import MlxconfigError, configure


class FirmwareFailure(Exception):
    """A failure before any card was written (the message names the input or the card)."""


def _card_label(card):
    return "%s (%s)" % (",".join(card["devices"]), card["pci"])


def _unmatched_text(unmatched):
    return (" No card on this host matches %s; those entries do nothing here." % ", ".join(unmatched)) if unmatched else ""


def _read_again(make_device, pci, sysfs_root, check_mode, fallback):
    try:
        return configure(make_device, pci, {}, False, sysfs_root, check_mode)
    except MlxconfigError:
        return fallback


def desired_state(make_device, devices, entries, sysfs_root, check_mode, read_all=False):
    """``devices`` is ``ansible_facts.rdma.devices``, ``entries`` the role's entries; ``make_device(pci)`` gives the
    mlxconfig.Device of a card. Returns the module's result (without the module's own keys)."""
    try:
        firmware_select.targets(devices, entries, {})  # the entries' own shape, before any card is read
    except firmware_select.SelectError as exc:
        raise FirmwareFailure(str(exc))
    cards = firmware_select.cards(devices)
    if not entries and not read_all:
        return dict(changed=False, cards=[], unmatched=[], commands=[], reboot_reasons=[], refused=[],
                    diff=dict(before={}, after={}))
    reads = {}
    for card in cards:
        try:
            reads[card["pci"]] = configure(make_device, card["pci"], {}, False, sysfs_root, check_mode)
        except MlxconfigError as exc:
            raise FirmwareFailure("mlxconfig %s: %s" % (card["pci"], exc))
    infos = dict((pci, read["device_info"]) for pci, read in reads.items())
    targets = firmware_select.targets(devices, entries, infos)
    unmatched = firmware_select.unmatched_selectors(devices, entries, infos)
    missing = firmware_select.missing_params(targets, list(reads.values()))
    if missing:
        raise FirmwareFailure("%s. Nothing was written. Select the cards that have it (part number, PCI address, "
                              "mlx5_N) instead of all of them.%s" % ("; ".join(missing), _unmatched_text(unmatched)))
    results, refused = dict(reads), []
    for target in targets:
        try:
            results[target["pci"]] = configure(make_device, target["pci"], target["params"], False, sysfs_root,
                                               check_mode)
        except MlxconfigError as exc:
            refused.append(dict(pci=target["pci"], devices=target["devices"], changed=exc.changed,
                                msg="mlxconfig %s: %s" % (target["pci"], exc)))
            if exc.changed:  # written, then the read-back differed: what the card now has pending is reported
                results[target["pci"]] = _read_again(make_device, target["pci"], sysfs_root, check_mode,
                                                     results[target["pci"]])
    by_pci = dict((card["pci"], card) for card in cards)
    out_cards = [dict(results[pci], devices=by_pci[pci]["devices"],
                      params=next((t["params"] for t in targets if t["pci"] == pci), {}))
                 for pci in sorted(results)]
    diff_before, diff_after = {}, {}
    for card in out_cards:
        label = _card_label(by_pci[card["device"]])
        if card["diff"]["before"] or card["diff"]["after"]:
            diff_before[label], diff_after[label] = card["diff"]["before"], card["diff"]["after"]
    commands = [" ".join(command) for card in out_cards if card["changed"] for command in card["commands"]]
    return dict(
        changed=bool(commands) or any(item["changed"] for item in refused),
        cards=out_cards,
        unmatched=unmatched,
        commands=commands,
        reboot_reasons=firmware_select.reboot_reasons(out_cards, devices),
        refused=refused,
        diff=dict(before=diff_before, after=diff_after))
