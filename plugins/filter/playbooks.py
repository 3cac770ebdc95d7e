# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the shipped playbooks (site.yml, rolling_reboot.yml): their own inputs (the collection-wide rdma_*
variables, the devices a host needs, the rolling reboot's), the roles' inputs their specs cannot check, and the ports
the rolling reboot checks, the peers in the summary."""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import peers as fabric_peers
from ansible_collections.hpcnet.rdma.plugins.module_utils.play import play_inputs
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts as rdma_facts

__metaclass__ = type


def rdma_input_errors(inputs):
    """The collection-wide ``rdma_*`` variables given -> one message per problem."""
    return play_inputs.collection_errors(inputs or {})


def rdma_role_input_errors(values):
    """The roles' variables given ({name: value}) -> one message per problem their argument specs cannot see and
    no host is needed for (host paths, the rdma_host settings), from the roles' own rules."""
    return play_inputs.role_errors(values or {})


def rdma_role_inputs(roles):
    """Role names -> the variables of theirs that rdma_role_input_errors reads (and rdma_sysfs_root)."""
    return play_inputs.role_inputs(roles or [])


def rdma_role_spec_errors(results):
    """The registered loop of validate_argument_spec over the roles -> one message per refused input, a value of the
    wrong type completed with what its option takes."""
    return play_inputs.spec_errors(results or [])


def rdma_device_errors(read, inputs, host):
    """site.yml's registered ``rdma_facts`` read, the collection-wide inputs and the host's name -> the message of a
    host without an RDMA device that needs one, or of a read that failed."""
    return play_inputs.device_errors(read, inputs or {}, host)


def rdma_rail_errors(hostvars, hosts, groups, allow_uneven=None):
    """``hostvars``, the play's hosts, ``groups`` and ``rdma_allow_uneven_rails`` -> ``{errors: {host: [message]},
    warnings: [message]}``: hosts of one fabric group with another number of compute rails than most."""
    def facts_of(host):
        try:
            return ((hostvars[host] or {}).get("ansible_facts") or {}).get("rdma")
        except KeyError:
            return None
    return play_inputs.rail_errors(facts_of, hosts, groups, allow_uneven)


def rolling_reboot_input_errors(inputs):
    """The ``rolling_reboot_*`` variables given -> one message per problem."""
    return play_inputs.rolling_reboot_errors(inputs or {})


def rdma_ports(rdma, state=None, lines=False, by="name"):
    """``ansible_facts.rdma`` -> sorted ``dev:port`` (only those in ``state`` when given; ``by='pci'``:
    ``<PCI function>/<port>``, which a device rename keeps), or with ``lines`` the ``dev:port STATE/phys_state
    link_layer`` text of every port."""
    return rdma_facts.port_lines(rdma) if lines else rdma_facts.ports(rdma, state, by)


def rdma_peer_summary(rdma):
    """``ansible_facts.rdma`` read with ``peers: true`` -> the summary's line of the compute and storage ports' peers
    (``mlx5_0:1 -> leaf01:swp1, ...``, then why a source read nothing); None for facts read without peers."""
    return fabric_peers.summary(rdma)


class FilterModule:
    """hpcnet.rdma filters of the playbooks' inputs."""

    def filters(self):
        return {"rdma_input_errors": rdma_input_errors, "rdma_role_input_errors": rdma_role_input_errors,
                "rdma_role_inputs": rdma_role_inputs, "rdma_role_spec_errors": rdma_role_spec_errors,
                "rdma_device_errors": rdma_device_errors,
                "rolling_reboot_input_errors": rolling_reboot_input_errors, "rdma_rail_errors": rdma_rail_errors,
                "rdma_ports": rdma_ports, "rdma_peer_summary": rdma_peer_summary}
