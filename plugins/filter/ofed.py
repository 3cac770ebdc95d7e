# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the ofed role: vendor stack input checks, mlnxofedinstall's output, apt candidates, what a run comes to
(settled or not, the installed version, what waits for a reboot)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import ofed_outcome, ofed_stack


def ofed_input_errors(provider, inputs):
    """``ofed_provider`` + the role's vendor inputs -> the list of problems, each naming its field (an artifact on
    the controller must be there: filters run on the controller)."""
    return ofed_stack.input_errors(provider, inputs or {}, os.path.isfile)


def ofed_installer_result(stdout):
    """mlnxofedinstall's stdout -> ``{passed, failed_package, log, errors, activation}``."""
    return ofed_stack.parse_installer_output(stdout)


def ofed_apt_candidates(stdout):
    """``apt-cache policy`` output -> the names of the packages a configured source can install."""
    return sorted(name for name, candidate in ofed_stack.parse_apt_policy(stdout).items() if candidate)


def ofed_outcome_of(probe, provider, openib_conf, version_package, driver_probe=None, after=None, inbox_after=None):
    """The preflight's probe and the role's later probes -> ``{stack_settled, settled, installed_version,
    reboot_reasons}`` (module_utils/stack/ofed_outcome.py)."""
    return ofed_outcome.outcome(probe, provider, openib_conf, version_package, driver_probe, after, inbox_after)


def ofed_reboot_reasons(probe):
    """An ``ofed_stack`` probe -> what waits for a reboot, in the shape of ``rdma_reboot_reasons``."""
    return ofed_outcome.reboot_reasons(probe)


class FilterModule:
    """hpcnet.rdma ofed filters."""

    def filters(self):
        return {"ofed_input_errors": ofed_input_errors, "ofed_installer_result": ofed_installer_result,
                "ofed_apt_candidates": ofed_apt_candidates, "ofed_outcome": ofed_outcome_of,
                "ofed_reboot_reasons": ofed_reboot_reasons}
