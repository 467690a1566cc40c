# SPDX-License-Identifier: BSD-2-Clause
# The tool specs (specs/*.toml, specs/README.md): each tool's options,
# usage, examples and the shared limits, declared once and turned by
# specs/gentool into
#   $(O)/gen/libbpf/TOOL.spec.h  the libbpf tool's option table and help
#   $(O)/gen/libbpf/probekit_common.spec.h  the options every tool takes
#   $(O)/gen/probekit_limits.h   the limits, for blktgt, the libbpf tools
#                                and their BPF programs
# and, by make tools-doc, the man pages' generated regions.  The bcc/
# tools read the same specs at run time (bcc/probekit_bcc_spec.py).
# TOOLSPEC_DIR=DIR reads them elsewhere (a test builds from a copy).

TOOLSPEC_DIR ?= specs
GENTOOL      := specs/gentool
GENTOOL_DEPS := $(GENTOOL) probes/probelib/toolspec.py $(TOOLSPEC_DIR)/common.toml \
                $(TOOLSPEC_DIR)/privileges.toml
SPEC_TOOLS   := $(filter-out common limits privileges,$(patsubst specs/%.toml,%,$(wildcard specs/*.toml)))
LIMITS_H     := $(O)/gen/probekit_limits.h

.PHONY: tools-doc

$(LIBBPF_GEN)/%.spec.h: $(TOOLSPEC_DIR)/%.toml $(GENTOOL_DEPS) | $(LIBBPF_GEN)
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENTOOL) --spec-dir $(TOOLSPEC_DIR) header $* -o $@

# tool_options.c's common options (specs/common.toml), and the words of
# what a tool lost (toolspec.LOSSES).
$(LIBBPF_GEN)/probekit_common.spec.h: $(GENTOOL_DEPS) $(TOOLSPEC_DIR)/limits.toml | $(LIBBPF_GEN)
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENTOOL) --spec-dir $(TOOLSPEC_DIR) common -o $@
# tool_drain.c's loss words (toolspec.LOSSES), usdt_sites.c's empty
# results' causes (EMPTY_GATED, EMPTY_KEYS, GATED; funclat.c's
# EMPTY_UNCALLED), and the one wording of a misspelt probe and a missing
# target (NEAREST, TARGET_*), there too.
$(LIBBPF_OBJ)/tool_options.o $(LIBBPF_OBJ)/tool_drain.o \
$(LIBBPF_OBJ)/usdt_sites.o $(LIBBPF_OBJ)/exporter.o \
$(LIBBPF_OBJ)/funclat.o: $(LIBBPF_GEN)/probekit_common.spec.h

$(LIMITS_H): $(TOOLSPEC_DIR)/limits.toml $(GENTOOL) probes/probelib/toolspec.py | $(O)/gen
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENTOOL) --spec-dir $(TOOLSPEC_DIR) limits -o $@

# A tool's user space includes its spec header; everything that includes
# the limits (mk/*.mk adds its objects) is rebuilt when they change.
$(foreach t,$(SPEC_TOOLS),$(eval $(LIBBPF_OBJ)/$(t).o: $(LIBBPF_GEN)/$(t).spec.h))
.SECONDARY: $(SPEC_TOOLS:%=$(LIBBPF_GEN)/%.spec.h)

tools-doc:
	$(Q)for t in $(SPEC_TOOLS); do \
		$(PYTHON) $(GENTOOL) man $$t man/probekit-$$t.8 || exit 1; \
	done

# Bash completion, one file per command (bash-completion loads
# completions/COMMAND when COMMAND is first completed): each tool's
# options from its spec and common.toml, for both forms; every other
# command's (gentool's COMMANDS) from its own --help, read when first
# completed, so that a cross-built command need not run here.
COMPLETION_DIR := $(O)/share/bash-completion/completions
COMPLETION_COMMANDS := $(shell $(PYTHON) $(GENTOOL) commands)
COMPLETIONS    := $(foreach t,$(SPEC_TOOLS),$(COMPLETION_DIR)/probekit-$(t) $(COMPLETION_DIR)/probekit-$(t)-bcc) \
	$(COMPLETION_COMMANDS:%=$(COMPLETION_DIR)/%)

all: $(COMPLETIONS)

$(COMPLETION_DIR):
	$(Q)mkdir -p $@

$(COMPLETION_DIR)/probekit-%-bcc: $(TOOLSPEC_DIR)/%.toml $(GENTOOL_DEPS) | $(COMPLETION_DIR)
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENTOOL) --spec-dir $(TOOLSPEC_DIR) completion $* --form bcc -o $@

$(COMPLETION_DIR)/probekit-%: $(TOOLSPEC_DIR)/%.toml $(GENTOOL_DEPS) | $(COMPLETION_DIR)
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENTOOL) --spec-dir $(TOOLSPEC_DIR) completion $* -o $@

$(COMPLETION_COMMANDS:%=$(COMPLETION_DIR)/%): $(COMPLETION_DIR)/%: $(GENTOOL_DEPS) | $(COMPLETION_DIR)
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENTOOL) command-completion $* -o $@
