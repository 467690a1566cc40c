# SPDX-License-Identifier: BSD-2-Clause
# make fuzz-nbd: fuzz the NBD negotiation engine and request checks
# (target/nbd_proto.c) with libFuzzer, ASan and UBSan, for a bounded time.
#
#   make fuzz-nbd [O=DIR] [FUZZ_NBD_SECONDS=N | FUZZ_SECONDS=N] [FUZZ_CC=clang]
#
# The corpus grows in $(O)/fuzz/nbd/corpus across runs, starting from the
# seeds fuzz/nbd_seeds.py writes; a crash leaves its input in
# $(O)/fuzz/nbd/ and fails the target.  $(O)/fuzz/nbd/replay is the same
# harness with a main(), built by the ordinary compiler, that replays files.

FUZZ_CC          ?= clang
FUZZ_NBD_SECONDS ?= $(if $(FUZZ_SECONDS),$(FUZZ_SECONDS),60)
FUZZ_NBD_DIR     := $(O)/fuzz/nbd
FUZZ_NBD_SRCS    := fuzz/nbd_fuzz.c target/nbd_proto.c
FUZZ_NBD_DEPS    := $(FUZZ_NBD_SRCS) fuzz/nbd_exports.h target/nbd_proto.h target/bdev.h include/io_batch.h \
		    include/blktgt_states.h mk/fuzz_nbd.mk \
		    $(O)/gen/probekit_limits.h
FUZZ_NBD_CFLAGS   = -std=gnu11 -D_GNU_SOURCE -g -O1 -Itarget -Iinclude -I$(O)/gen $(WARN) $(FUZZ_SAN)

.PHONY: fuzz-nbd fuzz-nbd-replay

$(FUZZ_NBD_DIR)/fuzz: $(FUZZ_NBD_DEPS)
	$(Q)mkdir -p $(@D)
	$(call msg,FUZZCC,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_NBD_CFLAGS) -fsanitize=fuzzer -o $@ $(FUZZ_NBD_SRCS)

$(FUZZ_NBD_DIR)/replay: $(FUZZ_NBD_DEPS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(FUZZ_NBD_CFLAGS) -DNBD_FUZZ_STANDALONE -o $@ $(FUZZ_NBD_SRCS)

$(FUZZ_NBD_DIR)/seeds/.stamp: fuzz/nbd_seeds.py
	$(Q)$(PYTHON) fuzz/nbd_seeds.py $(@D) && touch $@

fuzz-nbd: $(FUZZ_NBD_DIR)/fuzz $(FUZZ_NBD_DIR)/seeds/.stamp
	$(Q)mkdir -p $(FUZZ_NBD_DIR)/corpus
	$(Q)$(FUZZ_NBD_DIR)/fuzz -max_total_time=$(FUZZ_NBD_SECONDS) \
		-max_len=16384 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_NBD_DIR)/ \
		$(FUZZ_NBD_DIR)/corpus $(FUZZ_NBD_DIR)/seeds

# Replay the seeds (and any corpus) through the standalone build: quick,
# needs no clang, and is what the test suite runs.
fuzz-nbd-replay: $(FUZZ_NBD_DIR)/replay $(FUZZ_NBD_DIR)/seeds/.stamp
	$(Q)$(FUZZ_NBD_DIR)/replay $(FUZZ_NBD_DIR)/seeds/[!.]* \
		$(wildcard $(FUZZ_NBD_DIR)/corpus/*)
