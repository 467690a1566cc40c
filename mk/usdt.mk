# SPDX-License-Identifier: BSD-2-Clause
# probekit's C reader of USDT notes and argument specs (probes/usdt/), as the
# static archive $(USDT_LIB) that C tools (and the wrapper's helper,
# mk/wrapper.mk) link with -lelf.
#
#   probes/usdt/registers --genregs--> $(O)/gen/usdt_regs.h (the one
#                                      register table, for C)
#   probes/usdt/usdt_notes.c --cc--> $(USDT_LIB)

USDT_OBJ  := $(O)/obj/usdt
USDT_LIB  := $(O)/lib/libprobekit_usdt.a
USDT_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(WARN) $(BASE_CFLAGS) -Iprobes/usdt -I$(O)/gen \
	$(SAN_CFLAGS) $(EXTRA_CFLAGS)
USDT_LDLIBS := -lelf
USDT_REGS_H := $(O)/gen/usdt_regs.h

# A cross-build without arm64 libelf (CROSS_LIBS=0, Makefile) leaves it out.
ifneq ($(CROSS_LIBS),0)
all: $(USDT_LIB)
endif

$(USDT_OBJ) $(O)/lib:
	$(Q)mkdir -p $@

$(USDT_OBJ)/%.o: probes/usdt/%.c $(O)/.config | $(USDT_OBJ)
	$(call msg,CC,$@)
	$(Q)$(CC) $(USDT_CFLAGS) -MMD -MP -c $< -o $@

$(USDT_LIB): $(USDT_OBJ)/usdt_notes.o | $(O)/lib
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(USDT_REGS_H): probes/usdt/registers probes/usdt/genregs \
		probes/probelib/registers.py | $(O)/gen
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) probes/usdt/genregs $< -o $@

$(USDT_OBJ)/usdt_notes.o: $(USDT_REGS_H)

-include $(wildcard $(USDT_OBJ)/*.d)

