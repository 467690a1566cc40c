# SPDX-License-Identifier: BSD-2-Clause
# Typed structs for bpftrace scripts: probekit-structs reads blktgt's DWARF
# and writes the definitions (and enum name tables) of the types below to
# $(STRUCTS_BT), named after the binary.  probekit-bpftrace prepends that
# file to a script that asks for it with "// probekit: structs NAME...",
# after checking that the file was made from the traced binary (its
# build-id) and provides every NAME.  Made at build time, from the binary
# being built: never copied by hand.

STRUCTS_DIR   := $(O)/share/probekit/structs
STRUCTS_BT    := $(STRUCTS_DIR)/$(notdir $(TARGET)).bt
STRUCTS_TYPES := export bdev io_rec
STRUCTS_ENUMS := export_state bdev_io_type

all: $(STRUCTS_BT)

$(STRUCTS_BT): $(TARGET) probes/structs $(wildcard probes/probelib/*.py) mk/structs.mk
	$(call msg,STRUCTS,$@)
	$(Q)mkdir -p $(@D)
	$(Q){ $(PYTHON) probes/structs $(TARGET) $(STRUCTS_TYPES) && \
		$(PYTHON) probes/structs --enums $(TARGET) $(STRUCTS_ENUMS); } > $@
