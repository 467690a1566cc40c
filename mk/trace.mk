# The trace ring's dump tool, installed beside blktgt so that the command
# blktgt prints at start ($(O)/bin/blktgt_trace -p PID) runs as printed.
TRACE_TOOL := $(O)/bin/blktgt_trace

all: $(TRACE_TOOL)

$(TRACE_TOOL): target/blktgt_trace | $(O)/bin
	$(call msg,INSTALL,$@)
	$(Q)install -m 0755 $< $@
