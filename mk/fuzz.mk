# SPDX-License-Identifier: BSD-2-Clause
# make fuzz-jsonrpc: fuzz the JSON parser and the JSON-RPC request and
# params decoding (target/json.c, target/jsonrpc_parse.c) with libFuzzer,
# ASan and UBSan, for a bounded time.
#
#   make fuzz-jsonrpc [O=DIR] [FUZZ_SECONDS=N] [FUZZ_CC=clang]
#   make fuzz-jsonrpc-replay     replay seeds and corpus (no clang needed)
#
# The corpus grows in $(O)/fuzz/jsonrpc/corpus across runs, starting from
# the seeds the harness itself writes; a crash leaves its input in
# $(O)/fuzz/jsonrpc/ and fails the target.

# Shared by fuzz targets (each may pick its own).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN     ?= $(SANITIZE)

FUZZ_JSONRPC_DIR    := $(O)/fuzz/jsonrpc
FUZZ_JSONRPC_SRCS   := fuzz/jsonrpc_fuzz.c target/json.c target/jsonrpc_parse.c
FUZZ_JSONRPC_DEPS   := $(FUZZ_JSONRPC_SRCS) target/json.h target/jsonrpc.h target/jsonrpc_parse.h mk/fuzz.mk
FUZZ_JSONRPC_CFLAGS  = -std=gnu11 -D_GNU_SOURCE -g -O1 -Itarget $(WARN) $(FUZZ_SAN)

.PHONY: fuzz-jsonrpc fuzz-jsonrpc-replay

$(FUZZ_JSONRPC_DIR)/fuzz: $(FUZZ_JSONRPC_DEPS)
	$(Q)mkdir -p $(@D)
	$(call msg,FUZZCC,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_JSONRPC_CFLAGS) -fsanitize=fuzzer -o $@ $(FUZZ_JSONRPC_SRCS)

$(FUZZ_JSONRPC_DIR)/replay: $(FUZZ_JSONRPC_DEPS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FUZZ_JSONRPC_CFLAGS) -DJSONRPC_FUZZ_STANDALONE -o $@ $(FUZZ_JSONRPC_SRCS)

$(FUZZ_JSONRPC_DIR)/seeds/.stamp: $(FUZZ_JSONRPC_DIR)/replay
	$(Q)mkdir -p $(@D)
	$(Q)$< --seeds $(@D) && touch $@

fuzz-jsonrpc: $(FUZZ_JSONRPC_DIR)/fuzz $(FUZZ_JSONRPC_DIR)/seeds/.stamp
	$(Q)mkdir -p $(FUZZ_JSONRPC_DIR)/corpus
	$(Q)$(FUZZ_JSONRPC_DIR)/fuzz -max_total_time=$(FUZZ_SECONDS) \
		-max_len=4096 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_JSONRPC_DIR)/ \
		$(FUZZ_JSONRPC_DIR)/corpus $(FUZZ_JSONRPC_DIR)/seeds

fuzz-jsonrpc-replay: $(FUZZ_JSONRPC_DIR)/replay $(FUZZ_JSONRPC_DIR)/seeds/.stamp
	$(Q)$(FUZZ_JSONRPC_DIR)/replay $(FUZZ_JSONRPC_DIR)/seeds/[!.]* \
		$(wildcard $(FUZZ_JSONRPC_DIR)/corpus/*)
