# SPDX-License-Identifier: BSD-2-Clause
# The trace ring's dump tool, installed beside blktgt so that the command
# blktgt prints at start ($(O)/bin/blktgt-trace -p PID) runs as printed.
TRACE_TOOL := $(O)/bin/blktgt-trace

all: $(TRACE_TOOL)

$(TRACE_TOOL): target/blktgt-trace | $(O)/bin
	$(call msg,INSTALL,$@)
	$(Q)install -m 0755 $< $@
