# SPDX-License-Identifier: BSD-2-Clause
# make bench: probe overhead, per-hit cost, time to first event and
# throughput against nbdkit, written to bench/RESULTS.md (see bench/run).
#
#   make bench [O=DIR] [BENCH_RUNS=N] [BENCH_SECONDS=S]
#
# Builds what it compares into $(O): blktgt (USDT=1, with the tools of
# 'all'), $(O)/nousdt (USDT=0), $(O)/nop5 (USDT_NOP5=1) and the
# microbenchmarks in $(O)/bench.  Runs as root (it traces); takes about
# 7 minutes with the defaults (BENCH_RUNS=9, BENCH_SECONDS=3).
#
# tracecost (bench/tracecost.c) times one trace ring event (target/trace.h,
# the second tier) enabled and disabled; bench/run runs it in the same
# alternating repetitions as hitcost's attached USDT hit.  lttngcost
# (bench/lttngcost.c) times its peer, an LTTng-UST event with the same
# payload recorded into a snapshot-mode session (bench/lttngsession.py),
# in the same rotation.

BENCH_DIR   := $(O)/bench
BENCH_PROGS := $(foreach p,hitcost redzone,$(foreach v,stock nop5 nop5-redzone,$(BENCH_DIR)/$(p)-$(v)))
BENCH_PROGS += $(BENCH_DIR)/tracecost $(BENCH_DIR)/lttngcost
BENCH_CFLAGS = -std=gnu11 -D_GNU_SOURCE -fno-omit-frame-pointer $(WARN) $(BASE_CFLAGS)

# stock: sys/sdt.h's 1-byte nop.  nop5: the 5-byte nop with the red zone
# off, as make USDT_NOP5=1 builds blktgt.  nop5-redzone: the 5-byte nop
# WITH the red zone, the unsafe combination, kept to show the hazard.
bench_variant_flags = $(if $(filter %-nop5,$(1)),$(NOP5_CFLAGS),$(if $(filter %-nop5-redzone,$(1)),-Iprobes/nop5))

.PHONY: bench bench-progs bench-stacks bench-window
bench-progs: $(BENCH_PROGS)

$(BENCH_DIR):
	$(Q)mkdir -p $@

$(BENCH_DIR)/hitcost-%: bench/hitcost.c bench/bench.h probes/nop5/sys/sdt.h mk/bench.mk mk/nop5.mk | $(BENCH_DIR)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BENCH_CFLAGS) $(call bench_variant_flags,$@) $(BASE_LDFLAGS) -o $@ $<

# The red-zone demonstration needs a leaf that keeps its locals below the
# stack pointer; a stack-protector canary makes it move the stack pointer
# instead, hiding the hazard it exists to show.  So no canary, whatever
# the given flags say (a measuring tool, never installed).
$(BENCH_DIR)/redzone-%: bench/redzone.c bench/bench.h probes/nop5/sys/sdt.h mk/bench.mk mk/nop5.mk | $(BENCH_DIR)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BENCH_CFLAGS) -fno-stack-protector $(call bench_variant_flags,$@) $(BASE_LDFLAGS) -o $@ $<

$(BENCH_DIR)/tracecost: bench/tracecost.c bench/bench.h target/trace.c target/trace.h target/trace_defs.h mk/bench.mk | $(BENCH_DIR)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BENCH_CFLAGS) -pthread -Itarget -Ibench $(BASE_LDFLAGS) -o $@ bench/tracecost.c target/trace.c

$(BENCH_DIR)/lttngcost: bench/lttngcost.c bench/lttngcost_tp.h bench/bench.h mk/bench.mk | $(BENCH_DIR)
	$(call msg,CC,$@)
	$(Q)$(CC) $(BENCH_CFLAGS) -Ibench $(BASE_LDFLAGS) -o $@ bench/lttngcost.c -llttng-ust -ldl

bench: all bench-progs
	$(Q)$(MAKE) --no-print-directory O=$(O)/nousdt USDT=0 USDT_NOP5=0 $(O)/nousdt/bin/blktgt
	$(Q)$(MAKE) --no-print-directory O=$(O)/nop5 USDT=1 USDT_NOP5=1 $(O)/nop5/bin/blktgt
	$(Q)$(PYTHON) bench/run --build $(O) $(if $(BENCH_RUNS),--runs $(BENCH_RUNS)) \
		$(if $(BENCH_SECONDS),--seconds $(BENCH_SECONDS))

# make bench-stacks [BENCH_STACKS=trixie,sid] [BENCH_RUNS=N]: section 8 of
# RESULTS.md alone, the bpftrace headline rows (cost per hit, time to
# first event, bt/iolat_batch.bt's throughput) for the host's bpftrace and
# each stack's beside it, in one interleaved run (bench/stacks.py).  The
# stacks' chroots come from scripts/stack.sh (make stack-prepare STACK=NAME
# first, or this waits minutes for a cold one); PROBEKIT_STACK_CACHE is
# honoured.  Not part of make bench, which must not need them: about
# 12 minutes with the defaults on a loaded 2-vCPU machine.
BENCH_STACKS ?= trixie,sid

bench-stacks: all $(BENCH_DIR)/hitcost-stock $(BENCH_DIR)/hitcost-nop5
	$(Q)$(PYTHON) bench/run --build $(O) --only stacks --stacks '$(BENCH_STACKS)' \
		$(if $(BENCH_RUNS),--runs $(BENCH_RUNS))

# make bench-window [BENCH_RUNS=N]: section 9 of RESULTS.md alone, what the
# wrapper's one window (@__pk_gate, wrapper/join.c) costs a hit: section
# 3's count() on bench/hitcost.c's site under plain bpftrace beside the
# same count() through build/bin/probekit-bpftrace (bench/window.py).
# make bench measures it too.  About 3 minutes with the defaults.
bench-window: all $(BENCH_DIR)/hitcost-stock $(BENCH_DIR)/hitcost-nop5
	$(Q)$(PYTHON) bench/run --build $(O) --only window $(if $(BENCH_RUNS),--runs $(BENCH_RUNS))
