# hpcnet.rdma — developer entry points. `make demo` runs the main job on simulated hosts; `make test` runs all tests.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
PY          := $(CURDIR)/$(VENV)/bin/python
BIN         := $(CURDIR)/$(VENV)/bin
IMAGE       ?= hpcnet-rdma-base:bookworm
export HPCNET_TEST_IMAGE ?= $(IMAGE)
# Keep Ansible's and Molecule's working files inside the clone.
export ANSIBLE_HOME := $(CURDIR)/.ansible
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export MOLECULE_GLOB := molecule/*/molecule.yml
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# ansible-test wants the collection under ansible_collections/NS/NAME, outside this git checkout.
COLLECTION_TREE := $(or $(TMPDIR),/tmp)/hpcnet-rdma-sanity/ansible_collections/hpcnet/rdma

.PHONY: help venv image demo demo-fault demo-launcher demo-reboot demo-clean test lint sanity unit molecule bench build clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

venv: $(VENV)/.installed ## Create the Python venv with the pinned tools

image: ## Build the systemd base image of the simulated hosts (debootstrap; skipped when present)
	tests/container/build-image $(IMAGE)

demo: venv image ## Start four simulated hosts (Slurm nodes, Prometheus), run site.yml, verify.yml (report in fabric-report/), the health check
	$(BIN)/ansible-playbook tests/container/demo-up.yml
	$(BIN)/ansible-playbook site.yml -i inventories/demo
	$(BIN)/ansible-playbook verify.yml -i inventories/demo
	$(BIN)/ansible-playbook tests/container/demo-health.yml -i inventories/demo
	@echo "Fabric report: $(CURDIR)/fabric-report/fabric-report.html (JSON: fabric-report/fabric-report.json)"

demo-fault: venv ## After make demo: PFC off on roce-node02 (verify names it; repaired), then a cable pulled on roce-node01: health reason, sinfo -R, alert
	$(BIN)/ansible-playbook tests/container/demo-fault.yml -i inventories/demo
	cp fabric-report/fabric-report.html fabric-report/fabric-report-fault.html
	cp fabric-report/fabric-report.json fabric-report/fabric-report-fault.json
	$(BIN)/ansible-playbook site.yml -i inventories/demo --limit roce-node02 --tags roce
	@echo "Fabric report with the fault: $(CURDIR)/fabric-report/fabric-report-fault.html (roce-node02 repaired since)"
	$(BIN)/ansible-playbook tests/container/demo-fault-cable.yml -i inventories/demo

demo-launcher: venv ## After make demo: nccl-tests through srun with mpirun's options (srun's error), without PMIx (ranks alone), as the docs say (passes)
	$(BIN)/ansible-playbook tests/container/demo-launcher.yml -i inventories/demo

demo-reboot: venv ## After make demo: a firmware change on roce-node01 through playbooks/rolling_reboot.yml, and back
	$(BIN)/ansible-playbook tests/container/demo-reboot.yml -i inventories/demo

demo-clean: venv ## Remove the demo containers
	$(BIN)/ansible-playbook tests/container/demo-down.yml

TEST_STAGES := lint+sanity unit molecule

test: venv ## Run every test: ansible-lint and ansible-test sanity side by side, unit tests, Molecule (each stage's time at the end)
	@tests/tools/stages $(TEST_STAGES)

lint: venv ## ansible-lint, production profile
	$(BIN)/ansible-lint --profile production

# pytest-xdist workers (0: one process). A worker takes a whole scope (tests/unit/conftest.py): a test file, or one
# shared ansible-playbook run of the bad-input catalogue, so that no run and no module-scoped fixture is made twice.
# Two workers under xdist's own scheduling were slower (875 s against 568 s in one process): it splits a file between
# the workers, and each made the file's module-scoped fixtures (collection builds, browsers, simulated trees); since
# the catalogue's shared runs both also make each shared run (its 3-entry run: 100 s on one worker and 96 s on the
# other). xdist's own grouping (--dist loadgroup) does not work with pytest 9.
UNIT_JOBS ?= 2

unit: venv ## pytest unit tests (modules, parsers, simulator kit); UNIT_JOBS=N for N pytest-xdist workers
	$(PY) -m pytest tests/unit -q -p no:cacheprovider -n $(UNIT_JOBS) --durations=15

$(COLLECTION_TREE): FORCE
	rm -rf $@ && mkdir -p $@
	git ls-files -co --exclude-standard -z | grep -zv '^collections/' | xargs -0 cp --parents -t $@ 2>/dev/null || true

# ansible-test bootstraps pip in its import-test venvs with a script it downloads; ours works offline.
ANSIBLE_TEST_GET_PIP := $(HOME)/.ansible/test/cache/get_pip_24_2.py

$(ANSIBLE_TEST_GET_PIP): tests/sanity/get_pip_offline.py
	mkdir -p $(dir $@) && cp $< $@

sanity: venv $(COLLECTION_TREE) $(ANSIBLE_TEST_GET_PIP) ## ansible-test sanity on the modules and plugins
	cd $(COLLECTION_TREE) && $(BIN)/ansible-test sanity --python 3.11 --color no \
	    --exclude tests/ --exclude molecule/ $(SANITY_ARGS)

# tests/tools/molecule_lanes.py runs MOLECULE_JOBS of them at once where they share no container, network or subnet
# (ofed waits for firmware, verify for infiniband), in this order, and ends with the failed tasks of any that failed.
# MOLECULE_JOBS=1 runs one at a time. The order is the one whose two lanes end soonest over the scenario times of the
# last three CI runs together (session 27: default 691, verify 598, firmware 564, ofed 534, infiniband 482, roce 364,
# health 316 s: 1778 s against 1842 s in the order before; as short or shorter on the two earlier runs' times in
# issue 34, 1400 and 1784 s).
MOLECULE_SCENARIOS ?= firmware infiniband default roce health verify ofed
MOLECULE_JOBS ?= 2

molecule: venv image ## Molecule scenarios in Docker containers of simulated ConnectX hosts (two at a time)
	$(PY) tests/tools/molecule_lanes.py --jobs $(MOLECULE_JOBS) $(MOLECULE_SCENARIOS)

bench: venv ## Benchmarks: verify perftest rounds on 4/8 hosts, rdma_facts read time, roce_qos no-op, site.yml on 4/16/32/64 hosts, NCCL log analyser, health check, rail map of 1,000 hosts x 8 rails
	$(PY) tests/bench/bench_verify_rounds.py --sizes 4,8
	$(PY) tests/bench/bench_rdma_facts.py
	$(PY) tests/bench/bench_roce_qos.py
	$(PY) tests/bench/bench_roce_qos.py --profile cx7_roce_400g_2x --backend dcb
	$(PY) tests/bench/bench_site_scale.py --sizes 4,16,32,64
	$(PY) tests/bench/bench_nccl_log.py
	$(PY) tests/bench/bench_health.py
	$(PY) tests/bench/bench_rail_map.py

build: venv ## Build the Galaxy artifact
	$(BIN)/ansible-galaxy collection build --force --output-path build/

clean: demo-clean ## Remove build output
	rm -rf build .ansible tests/output

FORCE:
