// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * io_batch.bpf.h: reading blktgt:io__batch's records in a BPF program.
 *
 *   io__batch(s32 thread, s32 count, struct io_rec *recs, char *bdev_names,
 *             u64 flush_ns, u64 bdevs_merged)
 *
 * The record is declared once, in include/io_batch.h, which this includes.
 * A batch (up to 12 KiB) is larger than the 512-byte BPF stack, so it is
 * copied with one read into a per-CPU scratch map, then walked with a
 * loop bounded by IO_BATCH_MAX.  Used by the histogram tools (through
 * blktgt_io.bpf.h) and the exporter.
 *
 * The scratch buffer is per CPU, not per run, and a uprobe's program is
 * preemptible on a kernel that preempts "full" or "lazy" (PREEMPT_DYNAMIC
 * booted so, or PREEMPT_RT): the kernel's bpf_prog_run_array_uprobe()
 * runs it under migrate_disable() and rcu_read_lock(), which with
 * PREEMPT_RCU leave preemption on, and makes no recursion check (neither
 * bpf_prog_active nor the program's own counter: no miss is counted).  A
 * reactor preempted in the walk lets another traced thread on its CPU run
 * the same program over the same buffer.  So io_batch_take() owns the
 * buffer, by a flag taken with one atomic exchange, until
 * io_batch_release(); a hit that finds it taken reads nothing and hands
 * its record count to the caller, which counts them dropped (the
 * histogram tools apart from a full table's drops, by reason:
 * blktgt_io.bpf.h's hist_busy, hist_unreadable, hist_bad_count).
 */
#ifndef PROBEKIT_IO_BATCH_BPF_H
#define PROBEKIT_IO_BATCH_BPF_H

#include "io_batch.h"

struct io_batch_buf {
	struct io_rec recs[IO_BATCH_MAX];
	/* Nonzero from io_batch_take() to io_batch_release(); 64 bits
	 * because clang's default BPF CPU has only a 64-bit exchange.  After
	 * the records, which a copy to the value's start keeps aligned. */
	__u64 busy;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_batch_buf);
} io_batch_scratch SEC(".maps");

/*
 * The registers an operand can name, as libbpf's USDT spec gives them: an
 * offset into the architecture's user register layout (struct pt_regs on
 * x86, struct user_pt_regs on arm64, which bpf_tracing.h's
 * __PT_REGS_CAST() names).
 */
#if defined(__TARGET_ARCH_x86)
typedef struct pt_regs io_batch_regs_t;
#define IO_BATCH_REGS(X) X(ax) X(bx) X(cx) X(dx) X(si) X(di) X(bp) X(sp) \
	X(r8) X(r9) X(r10) X(r11) X(r12) X(r13) X(r14) X(r15)
#elif defined(__TARGET_ARCH_arm64)
typedef struct user_pt_regs io_batch_regs_t;
#define IO_BATCH_REGS(X) X(regs[0]) X(regs[1]) X(regs[2]) X(regs[3]) \
	X(regs[4]) X(regs[5]) X(regs[6]) X(regs[7]) X(regs[8]) X(regs[9]) \
	X(regs[10]) X(regs[11]) X(regs[12]) X(regs[13]) X(regs[14]) \
	X(regs[15]) X(regs[16]) X(regs[17]) X(regs[18]) X(regs[19]) \
	X(regs[20]) X(regs[21]) X(regs[22]) X(regs[23]) X(regs[24]) \
	X(regs[25]) X(regs[26]) X(regs[27]) X(regs[28]) X(regs[29]) \
	X(regs[30]) X(sp)
#else
#error "io_batch.bpf.h: the user register layout is unknown for this architecture"
#endif

/*
 * Argument n of this hit, as bpf_usdt_arg() reads it from the spec
 * bpf_program__attach_usdt() wrote (usdt.bpf.h), except that an operand in
 * a register is read straight from ctx.  bpf_usdt_arg() reads a register
 * with bpf_probe_read_kernel(): with its own call and the attach cookie's,
 * that cost about 55 ns per argument here (bench/RESULTS.md), paid
 * once per batch.  Any other operand goes to bpf_usdt_arg().
 */
static __always_inline int io_batch_arg(struct pt_regs *ctx,
					const struct __bpf_usdt_spec *spec,
					__u32 n, long *res)
{
	const struct __bpf_usdt_arg_spec *a;
	unsigned long v;

	if (n >= BPF_USDT_MAX_ARG_CNT || n >= spec->arg_cnt)
		return -ENOENT;
	a = &spec->args[n];
	if (a->arg_type != BPF_USDT_ARG_REG)
		return bpf_usdt_arg(ctx, n, res);
	/* Each case a load at a constant offset, which the verifier
	 * allows in ctx; a computed offset it refuses.  In asm: clang
	 * would make the loads one, from a computed address. */
#define REG(r) ({ unsigned long _v;					\
	__asm__ volatile("%0 = *(u64 *)(%1 + %2)" : "=r"(_v)		\
			 : "r"(ctx), "i"(__builtin_offsetof(io_batch_regs_t, r)));	\
	_v; })
#define REG_CASE(r) case __builtin_offsetof(io_batch_regs_t, r): v = REG(r); break;
	switch (a->reg_off) {
	IO_BATCH_REGS(REG_CASE)
	default: return bpf_usdt_arg(ctx, n, res);
	}
#undef REG_CASE
#undef REG
	/* The operand's size, as bpf_usdt_arg() takes it: "-4@%eax" is the
	 * low 32 bits, sign-extended. */
	v <<= a->arg_bitshift;
	*res = a->arg_signed ? (long)v >> a->arg_bitshift : (long)(v >> a->arg_bitshift);
	return 0;
}

/*
 * What the name table merges, as io__batch's last argument, bdevs_merged,
 * says (include/io_batch.h): bdevs_cut and bdevs_other, in that order; -1
 * each when the site does not pass it (a service's io__batch of five
 * arguments) or it cannot be read.
 */
enum { IO_BATCH_MERGE_CUT, IO_BATCH_MERGE_OTHER, IO_BATCH_MERGES };
#define IO_BATCH_MERGED_ARG 5	/* bdevs_merged */

/*
 * io__batch's record count, from 1 to IO_BATCH_MAX, in *n and their
 * address in *recs; -1 when an argument cannot be read or the count is out
 * of range.  With names, the bdev name table's address too (0 when it
 * cannot be read); with merges, the merge counts (each -1 unless the
 * count was read and in range, and the site passes bdevs_merged).
 *
 * Only the arguments a program needs are read (BPF_USDT() would read all
 * four on every hit, the thread number included, which a hit pays for
 * every record it carries), and libbpf's spec is looked up once for all.
 */
static __always_inline int io_batch_args(struct pt_regs *ctx, long *n, long *recs,
					 long *names, long *merges)
{
	const struct __bpf_usdt_spec *spec;
	int spec_id = __bpf_usdt_spec_id(ctx);
	long m;

	if (merges)
		merges[IO_BATCH_MERGE_CUT] = merges[IO_BATCH_MERGE_OTHER] = -1;
	if (spec_id < 0)
		return -1;
	spec = bpf_map_lookup_elem(&__bpf_usdt_specs, &spec_id);
	if (!spec || io_batch_arg(ctx, spec, 1, n) ||
	    io_batch_arg(ctx, spec, 2, recs))
		return -1;
	if (*n <= 0 || *n > IO_BATCH_MAX)
		return -1;
	if (names && io_batch_arg(ctx, spec, 3, names))
		*names = 0;
	if (merges && !io_batch_arg(ctx, spec, IO_BATCH_MERGED_ARG, &m)) {
		merges[IO_BATCH_MERGE_CUT] = (__u32)m;
		merges[IO_BATCH_MERGE_OTHER] = (unsigned long)m >> 32;
	}
	return 0;
}

/* n records (1..IO_BATCH_MAX) from recs into b: 0, or the read's error. */
static __always_inline long io_batch_read(struct io_batch_buf *b, long n, long recs)
{
	__u64 size = (__u64)n * sizeof(struct io_rec);

	/* Keep clang from folding this bound into the count's: the verifier
	 * must see it on the size it checks. */
	PK_OPAQUE(size);
	if (size > sizeof(b->recs))
		return -1;
	return bpf_probe_read_user(b->recs, size, (const void *)recs);
}

/*
 * io__batch's records, copied into this CPU's scratch buffer, which this
 * run owns until io_batch_release(), and their number in *count.
 *
 * NULL when they cannot be read; then *count is the number of records
 * the hit carried, which the caller counts as dropped: the buffer is
 * owned by a run this one preempted (then *busy, unless busy is NULL, is
 * true, so that the caller can say why), or the read failed (it took no
 * record then).  *count is 0 when the count itself is out of range or
 * unreadable (or this CPU's buffer, a one-slot array's, is not found,
 * which does not happen): the caller counts the hit, whose records it
 * cannot number.  Only a non-NULL return is released.  names and
 * merges, unless NULL, are io_batch_args()'s (merges read whenever
 * *count is not 0).
 */
static __always_inline struct io_rec *io_batch_take_why(struct pt_regs *ctx, __u32 *count,
							long *names, long *merges,
							bool *busy)
{
	__u32 zero = 0;
	struct io_batch_buf *b = bpf_map_lookup_elem(&io_batch_scratch, &zero);
	long n, recs;

	*count = 0;
	if (merges)
		merges[IO_BATCH_MERGE_CUT] = merges[IO_BATCH_MERGE_OTHER] = -1;
	if (!b || io_batch_args(ctx, &n, &recs, names, merges))
		return NULL;
	*count = (__u32)n;
	/* One instruction: a preemption falls before or after it, so of
	 * two runs on this CPU exactly one sees 0. */
	if (__sync_lock_test_and_set(&b->busy, 1)) {
		if (busy)
			*busy = true;
		return NULL;
	}
	if (io_batch_read(b, n, recs)) {
		b->busy = 0;
		return NULL;
	}
	return b->recs;
}

/* io_batch_take_why() for a caller that counts the records it could not
 * read alike, busy or unreadable (the exporter's series_dropped), and a
 * hit of *count 0 apart. */
static __always_inline struct io_rec *io_batch_take(struct pt_regs *ctx, __u32 *count,
						    long *names, long *merges)
{
	return io_batch_take_why(ctx, count, names, merges, NULL);
}

/* Give back this CPU's scratch buffer, after a run's last read of the
 * records io_batch_take() returned. */
static __always_inline void io_batch_release(void)
{
	__u32 zero = 0;
	struct io_batch_buf *b = bpf_map_lookup_elem(&io_batch_scratch, &zero);

	if (!b)
		return;
	/* The records were read in bpf_loop()'s callback, a call clang
	 * cannot move loads across; the barrier says so for any other. */
	__asm__ volatile("" ::: "memory");
	*(volatile __u64 *)&b->busy = 0;
}

#endif
