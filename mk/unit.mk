# SPDX-License-Identifier: BSD-2-Clause
# make unit: the unit tests of blktgt's parsers, beside their fuzz
# harnesses in fuzz/: exact results on known inputs, where the fuzzers
# check invariants on any input.
#
#   fuzz/json_unit.c           target/json.c: values, statuses, limits, writer
#   fuzz/jsonrpc_parse_unit.c  target/jsonrpc_parse.c: the request envelope
#                              and the params decoder, code and message
#   fuzz/nbd_proto_unit.c      target/nbd_proto.c: negotiation bytes and
#                              states, request decoding and verdicts
#
# Each is built with ASan and UBSan by the ordinary compiler, with the
# build's warnings (WERROR=1 makes them errors), into $(O)/unit/, and run;
# each prints "NAME: N checks, F failed"; all run, and any F > 0 fails
# the target.
# tests/fuzz/test_units.py runs this target, so the suite does.

UNIT_DIR    := $(O)/unit
UNIT_TESTS  := json jsonrpc_parse nbd_proto
UNIT_BINS   := $(addprefix $(UNIT_DIR)/,$(addsuffix _unit,$(UNIT_TESTS)))
UNIT_CFLAGS  = -std=gnu11 -D_GNU_SOURCE -g -O1 -Itarget -Iinclude -Ifuzz -I$(O)/gen $(WARN) $(SANITIZE)

# What each test links: the parser it tests and what that parser calls.
UNIT_SRCS_json          := target/json.c
UNIT_SRCS_jsonrpc_parse := target/jsonrpc_parse.c target/json.c
UNIT_SRCS_nbd_proto     := target/nbd_proto.c

.PHONY: unit

UNIT_HDRS := fuzz/unit.h fuzz/nbd_exports.h target/json.h target/jsonrpc_parse.h target/nbd_proto.h target/bdev.h \
	     include/io_batch.h include/blktgt_states.h target/states.h \
	     $(LIMITS_H) $(O)/.config mk/unit.mk
$(foreach t,$(UNIT_TESTS),$(eval $(UNIT_DIR)/$(t)_unit: $(UNIT_SRCS_$(t))))

$(UNIT_DIR)/%_unit: fuzz/%_unit.c $(UNIT_HDRS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_SRCS_$*)

unit: $(UNIT_BINS)
	$(Q)rc=0; for t in $(UNIT_BINS); do $$t || rc=1; done; exit $$rc
