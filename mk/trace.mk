# SPDX-License-Identifier: BSD-2-Clause
# The trace ring's dump tool, beside blktgt so that the command blktgt
# prints at start ($(O)/bin/blktgt-trace -p PID) runs as printed.  A link,
# as mk/commands.mk makes for every script, so that it finds VERSION
# through its real path and make install installs it as a script.
TRACE_TOOL := $(O)/bin/blktgt-trace

all: $(TRACE_TOOL)

$(TRACE_TOOL): target/blktgt-trace mk/trace.mk | $(O)/bin
	$(call msg,LN,$@)
	$(Q)ln -sfr $< $@
