# SPDX-License-Identifier: BSD-2-Clause
# probekit-bpftrace's helper $(WRAPPER_SCAN), probekit-scan, from
# wrapper/*.c: the script joiner (wrapper/join.c) and the ELF look-ups the
# wrapper asks for (wrapper/scan.c), on the C reader of notes ($(USDT_LIB),
# mk/usdt.mk).  One program, not one per room: a trace whose executable
# holds every probe then starts with one helper run, which joins the
# scripts and reads the executable (the wrapper's start-up cost, measured
# by make bench's time to first event).  It sits in libexec/, not bin/:
# only probekit-bpftrace runs it.
#
#   wrapper/*.c + $(USDT_LIB) --cc -lelf--> $(WRAPPER_SCAN)

WRAPPER_OBJ  := $(O)/obj/wrapper
WRAPPER_OBJS := $(patsubst wrapper/%.c,$(WRAPPER_OBJ)/%.o,$(wildcard wrapper/*.c))
WRAPPER_SCAN := $(O)/libexec/probekit/probekit-scan
# The reader's flags, whose header (-Iprobes/usdt) the helper includes.
WRAPPER_CFLAGS = $(USDT_CFLAGS)

# It links libelf: not in a cross-build without arm64 libraries.
ifneq ($(CROSS_LIBS),0)
all: $(WRAPPER_SCAN)
endif

$(WRAPPER_OBJ):
	$(Q)mkdir -p $@

$(WRAPPER_OBJ)/%.o: wrapper/%.c $(O)/.config | $(WRAPPER_OBJ)
	$(call msg,CC,$@)
	$(Q)$(CC) $(WRAPPER_CFLAGS) -MMD -MP -c $< -o $@

-include $(wildcard $(WRAPPER_OBJ)/*.d)

# args.NAME's mistakes in the tools' words (toolspec.ARG_NO_NAMES, as
# SPEC_* from specs/gentool common, mk/toolspec.mk).
$(WRAPPER_OBJ)/argnames.o: $(LIBBPF_GEN)/probekit_common.spec.h

$(WRAPPER_SCAN): $(WRAPPER_OBJS) $(USDT_LIB)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(USDT_LDLIBS)
