# SPDX-License-Identifier: BSD-2-Clause
# Every command probekit builds or ships is in $(O)/bin under the name it
# is installed as (README.md, "Names"): probekit-TOOL for the libbpf tools
# (mk/libbpf.mk builds them there), probekit-TOOL-bcc for their BCC twins,
# probekit-bpftrace, probekit-check, probekit-list, probekit-gencatalog and
# probekit-structs, and blktgt, blktgt-rpc and blktgt-trace for the demo
# target.  The scripts are linked,
# not copied, so an edit in the checkout shows at once; each finds what it
# shares (bcc/probekit_bcc_*.py, VERSION) through its real path.

BCC_TOOLS := $(patsubst bcc/%,%,$(BCC_TOOL_FILES))
SCRIPT_LINKS := $(O)/bin/probekit-bpftrace:wrapper/bpftrace.sh \
	$(O)/bin/probekit-check:probes/probecheck \
	$(O)/bin/probekit-list:probes/list \
	$(O)/bin/probekit-gencatalog:probes/gencatalog \
	$(O)/bin/probekit-structs:probes/structs \
	$(O)/bin/blktgt-rpc:target/rpc.py \
	$(foreach t,$(BCC_TOOLS),$(O)/bin/probekit-$(t)-bcc:bcc/$(t))
SCRIPT_CMDS := $(foreach l,$(SCRIPT_LINKS),$(firstword $(subst :, ,$(l))))

all: $(SCRIPT_CMDS)

# ln -r makes the link relative, so a build directory can move with its
# checkout.
$(SCRIPT_CMDS): | $(O)/bin
	$(call msg,LN,$@)
	$(Q)ln -sfr $(word 2,$(subst :, ,$(filter $@:%,$(SCRIPT_LINKS)))) $@
