// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace.h: the in-process trace ring, blktgt's second tracing tier.
 *
 * USDT probes cost nothing until a tracer attaches, then about half a
 * microsecond per hit.  The trace ring costs tens of nanoseconds per event
 * while a group is enabled, one predictable branch while it is not, and
 * keeps the newest events of every reactor in a shared-memory file that
 * outlives a crash:
 *
 *   /dev/shm/blktgt_trace.pid<PID>   read by target/blktgt_trace
 *
 * The tracepoints are declared in the probe catalog (probes/blktgt.d, "@ring"
 * comments), from which gencatalog writes trace_defs.h; this header turns each into
 * a typed, inline record function:
 *
 *   trace_bdev_io_submit(owner, object, related, bdev, type, len, offset);
 *
 * owner is the recorder's id (a reactor index, an NBD connection id),
 * object the id of what the event is about (0 for none), related the id of
 * the object that caused it (0 for none).  Guard costly arguments with
 * trace_NAME_enabled(), as USDT call sites use _ENABLED().
 *
 * Contract of recording:
 *  - each thread writes only its own ring, registered by trace_thread_init();
 *    no locks, no syscalls (the TSC, or CLOCK_MONOTONIC through the vDSO);
 *  - a ring of ring_entries slots keeps the newest ring_entries - 1 events
 *    (a reader never trusts the slot being written, which after a crash
 *    may be half written); its header counts every event written, so a
 *    reader knows how many were overwritten;
 *  - an enabled event recorded on a thread without a ring is counted in the
 *    file header's "lost" field, not written.
 *
 * Timestamps: where the kernel itself keeps time with the TSC (its
 * clocksource is "tsc", so the TSC is constant-rate and synchronised across
 * CPUs), an event records the raw TSC, which costs about half a vDSO
 * clock_gettime() here.  The file header holds calibration pairs of
 * (TSC, CLOCK_MONOTONIC), the first at start-up and the newest at most a
 * second old while blktgt runs (trace_clock_sync()), from which the dump
 * tool converts every timestamp to CLOCK_MONOTONIC nanoseconds: the clock
 * behind bpftrace's nsecs, so ring events and bpftrace lines can be merged
 * by time.  Elsewhere (or with BLKTGT_TRACE_CLOCK=monotonic) events record
 * CLOCK_MONOTONIC directly.
 */
#ifndef BLKTGT_TRACE_H
#define BLKTGT_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "trace_defs.h"

/*
 * The CPU's own counter, read from user space with no syscall: x86-64's
 * TSC, or arm64's virtual counter CNTVCT_EL0, the one the kernel's
 * arch_sys_counter clocksource and its vDSO read.  Events record it where
 * the kernel keeps time with the same counter (TRACE_COUNTER_CLOCKSOURCE);
 * the file's calibration pairs then measure its rate against
 * CLOCK_MONOTONIC, so arm64's CNTFRQ_EL0 (a rate firmware sets, and may
 * set wrong) is not needed.  TRACE_COUNTER_NAME is its name in
 * BLKTGT_TRACE_CLOCK and in trace_status; "tsc" is also the file format's
 * name for any counter (TRACE_CLOCK_TSC).  Elsewhere: CLOCK_MONOTONIC.
 */
#if defined(__x86_64__)
#define TRACE_HAVE_COUNTER 1
#define TRACE_COUNTER_NAME "tsc"
#define TRACE_COUNTER_CLOCKSOURCE "tsc"
static inline uint64_t trace_counter(void)
{
	return __rdtsc();
}
#elif defined(__aarch64__)
#define TRACE_HAVE_COUNTER 1
#define TRACE_COUNTER_NAME "cntvct"
#define TRACE_COUNTER_CLOCKSOURCE "arch_sys_counter"
static inline uint64_t trace_counter(void)
{
	uint64_t v;

	/* isb: without it the read may be taken ahead of the code before
	 * it, as the kernel's own reads of this counter know. */
	__asm__ volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}
#else
#define TRACE_HAVE_COUNTER 0
#define TRACE_COUNTER_NAME "tsc"
#endif

/* ---- the file format (version 2; the dump tool checks every field) ---- */

#define TRACE_MAGIC          "BLKTGTTR"     /* 8 bytes, no NUL */
#define TRACE_VERSION        2
#define TRACE_ARG_BYTES      32             /* argument bytes per event */
#define TRACE_MAX_GROUPS     16
#define TRACE_MAX_THREADS    64             /* = REACTOR_MAX */
#define TRACE_MIN_ENTRIES    16             /* per ring, a power of two */
#define TRACE_MAX_ENTRIES    (1u << 22)
#define TRACE_DEFAULT_ENTRIES 65536         /* 4 MiB per reactor */
#define TRACE_DEFS_MAX       16384          /* the definition table (JSON) */
#define TRACE_PATH_FMT       "/dev/shm/blktgt_trace.pid%d"
#define TRACE_SPEC_MAX       1024           /* longest -e argument */
#define TRACE_CLOCK_MONOTONIC 0             /* ts is CLOCK_MONOTONIC ns */
#define TRACE_CLOCK_TSC       1             /* ts is TSC ticks: see the pairs */
#define TRACE_CLOCK_ENV      "BLKTGT_TRACE_CLOCK" /* "monotonic" or "tsc" */
#define TRACE_COREDUMP_SHARED_FILE 0x08  /* coredump_filter bit: the ring in a core */

/* The same instant on both clocks.  With TRACE_CLOCK_TSC, a timestamp ts
 * is CLOCK_MONOTONIC
 *   cal_start.mono_ns + (ts - cal_start.tsc) * (last.mono_ns - cal_start.mono_ns)
 *                                            / (last.tsc - cal_start.tsc)
 * where last is cal[cal_last]: the writer fills the other slot, then flips
 * cal_last, so the slot cal_last names is always whole, even after a crash. */
struct trace_clock_pair {
	uint64_t tsc;
	uint64_t mono_ns;
};

/* At offset 0.  Every offset and size is in bytes from the file start.
 * magic is written last at creation, so a half-made file is refused. */
struct trace_file_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;           /* sizeof(struct trace_file_header) */
	uint64_t file_size;
	uint32_t entry_size;            /* sizeof(struct trace_entry) */
	uint32_t ring_count;            /* one ring per reactor thread */
	uint64_t ring_entries;          /* events per ring, a power of two */
	uint64_t ring_offset;           /* ring 0 */
	uint64_t ring_stride;           /* ring i at ring_offset + i * stride */
	uint32_t ring_header_size;      /* sizeof(struct trace_ring_header) */
	uint32_t arg_bytes;             /* TRACE_ARG_BYTES */
	uint32_t defs_offset;           /* the definition table, JSON text */
	uint32_t defs_size;
	uint32_t pid;
	uint32_t group_count;
	uint64_t start_mono_ns;         /* CLOCK_MONOTONIC at creation */
	uint64_t start_real_ns;         /* CLOCK_REALTIME at creation */
	uint64_t lost;                  /* enabled events with no ring to go to */
	uint64_t group_masks[TRACE_MAX_GROUPS]; /* enabled tracepoints, now */
	uint32_t clock;                 /* TRACE_CLOCK_*: what entries' ts count */
	uint32_t cal_last;              /* 0 or 1: the newest of cal[] */
	struct trace_clock_pair cal_start;      /* at creation */
	struct trace_clock_pair cal[2];         /* refreshed by trace_clock_sync() */
	uint8_t reserved[32];
};

/* At the start of each ring, then ring_entries entries. */
struct trace_ring_header {
	uint64_t written;               /* events ever written to this ring */
	uint32_t index;                 /* reactor index */
	int32_t tid;
	char name[16];                  /* thread name, NUL-padded */
	uint64_t reserved[4];
};

/* One event: one cache line. */
struct trace_entry {
	uint64_t ts;                    /* in the header's clock */
	uint16_t tpoint;                /* group * 64 + bit */
	uint16_t reserved;
	uint32_t owner;
	uint64_t object;
	uint64_t related;
	uint8_t args[TRACE_ARG_BYTES];  /* packed in declaration order */
};

/* ---- names generated from trace_defs.h ---- */

#define TRACE_NEW_OBJECT 1

enum trace_group {
#define TRACE_G_ENUM(name, index, doc) TRACE_GROUP_##name = (index),
	TRACE_GROUPS(TRACE_G_ENUM)
#undef TRACE_G_ENUM
};
enum {
#define TRACE_G_COUNT(name, index, doc) + 1
	TRACE_GROUP_COUNT = 0 TRACE_GROUPS(TRACE_G_COUNT)
#undef TRACE_G_COUNT
};
enum trace_owner_type {
#define TRACE_O_ENUM(name, index, letter) TRACE_OWNER_##name = (index),
	TRACE_OWNERS(TRACE_O_ENUM)
#undef TRACE_O_ENUM
};
enum trace_object_type {
#define TRACE_J_ENUM(name, index, letter) TRACE_OBJECT_##name = (index),
	TRACE_OBJECTS(TRACE_J_ENUM)
#undef TRACE_J_ENUM
};
enum trace_tpoint {
#define TRACE_T_ENUM(name_, grp_, bit_, own_, obj_, fl_, rel_, doc_, args_) \
	TRACE_TP_##name_ = TRACE_GROUP_##grp_ * 64 + (bit_),
	TRACE_POINTS(TRACE_T_ENUM)
#undef TRACE_T_ENUM
};

/* Argument types: C type, size in the record, kind in the definition table. */
#define TRACE_CTYPE_INT   int64_t
#define TRACE_CTYPE_INT32 int32_t
#define TRACE_CTYPE_PTR   const void *
#define TRACE_CTYPE_STR8  const char *
#define TRACE_CTYPE_STR16 const char *
#define TRACE_CTYPE_STR24 const char *
#define TRACE_CTYPE_STR32 const char *
#define TRACE_SIZE_INT   8
#define TRACE_SIZE_INT32 4
#define TRACE_SIZE_PTR   8
#define TRACE_SIZE_STR8  8
#define TRACE_SIZE_STR16 16
#define TRACE_SIZE_STR24 24
#define TRACE_SIZE_STR32 32
#define TRACE_KIND_INT   "int"
#define TRACE_KIND_INT32 "int"
#define TRACE_KIND_PTR   "ptr"
#define TRACE_KIND_STR8  "string"
#define TRACE_KIND_STR16 "string"
#define TRACE_KIND_STR24 "string"
#define TRACE_KIND_STR32 "string"

/*
 * Walking an argument sequence (T1, n1)(T2, n2)...: the two macros of each
 * walk call each other, one pair per step, and the walk's last name gets
 * _END pasted on, which expands to nothing.  An empty sequence works too.
 */
#define TRACE_SEQ_END(...)  TRACE_SEQ_END_(__VA_ARGS__)
#define TRACE_SEQ_END_(...) __VA_ARGS__##_END

#define TRACE_PARAMS(seq)   TRACE_SEQ_END(TRACE_PARAMS_A seq)
#define TRACE_PARAMS_A(t, n) , TRACE_CTYPE_##t a_##n TRACE_PARAMS_B
#define TRACE_PARAMS_B(t, n) , TRACE_CTYPE_##t a_##n TRACE_PARAMS_A
#define TRACE_PARAMS_A_END
#define TRACE_PARAMS_B_END

#define TRACE_PUTS(seq)     TRACE_SEQ_END(TRACE_PUTS_A seq)
#define TRACE_PUTS_A(t, n)  p_ = trace_put_##t(p_, a_##n); TRACE_PUTS_B
#define TRACE_PUTS_B(t, n)  p_ = trace_put_##t(p_, a_##n); TRACE_PUTS_A
#define TRACE_PUTS_A_END
#define TRACE_PUTS_B_END

#define TRACE_SIZE(seq)     TRACE_SEQ_END(TRACE_SIZE_A seq)
#define TRACE_SIZE_A(t, n)  + TRACE_SIZE_##t TRACE_SIZE_B
#define TRACE_SIZE_B(t, n)  + TRACE_SIZE_##t TRACE_SIZE_A
#define TRACE_SIZE_A_END
#define TRACE_SIZE_B_END

/* ---- recording ---- */

/* Enabled tracepoints, one bit each, per group.  Written by -e and the
 * RPCs, read (relaxed) by every record call. */
extern uint64_t trace_group_masks[TRACE_GROUP_COUNT];

/* This thread's ring; entries is NULL on a thread without one. */
struct trace_local {
	struct trace_entry *entries;
	struct trace_ring_header *hdr;
	uint64_t mask;                  /* ring_entries - 1 */
	uint64_t head;                  /* = hdr->written */
};
extern __thread struct trace_local trace_tls;

void trace_count_lost(void);

static inline bool trace_tpoint_on(unsigned group, unsigned bit)
{
	return __atomic_load_n(&trace_group_masks[group], __ATOMIC_RELAXED) &
	       (1ull << bit);
}

/* True when events record the CPU's counter, the TSC or CNTVCT_EL0
 * (set once, by trace_init()). */
extern bool trace_clock_tsc;

static inline uint64_t trace_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* An event's timestamp, in the file's clock. */
static inline uint64_t trace_now(void)
{
#if TRACE_HAVE_COUNTER
	if (__builtin_expect(trace_clock_tsc, 1))
		return trace_counter();
#endif
	return trace_now_ns();
}

static inline struct trace_entry *trace_entry_begin(uint16_t tpoint, uint32_t owner,
						    uint64_t object, uint64_t related)
{
	struct trace_local *l = &trace_tls;
	struct trace_entry *e;

	if (__builtin_expect(l->entries == NULL, 0)) {
		trace_count_lost();
		return NULL;
	}
	e = &l->entries[l->head & l->mask];
	e->ts = trace_now();
	e->tpoint = tpoint;
	e->reserved = 0;
	e->owner = owner;
	e->object = object;
	e->related = related;
	return e;
}

/* Publish the entry: a live reader trusts entries below "written" only. */
static inline void trace_entry_commit(void)
{
	struct trace_local *l = &trace_tls;

	l->head++;
	__atomic_store_n(&l->hdr->written, l->head, __ATOMIC_RELEASE);
}

static inline uint8_t *trace_put_INT(uint8_t *p, int64_t v)
{
	memcpy(p, &v, sizeof(v));
	return p + sizeof(v);
}

static inline uint8_t *trace_put_INT32(uint8_t *p, int32_t v)
{
	memcpy(p, &v, sizeof(v));
	return p + sizeof(v);
}

static inline uint8_t *trace_put_PTR(uint8_t *p, const void *v)
{
	uint64_t u = (uint64_t)(uintptr_t)v;

	memcpy(p, &u, sizeof(u));
	return p + sizeof(u);
}

/* Copy at most n bytes of s, NUL-padded; a string of n bytes or more is
 * truncated to n bytes without a NUL (the reader bounds it by n). */
static inline uint8_t *trace_put_str(uint8_t *p, const char *s, size_t n)
{
	size_t i = 0;

	if (s)
		for (; i < n && s[i]; i++)
			p[i] = (uint8_t)s[i];
	memset(p + i, 0, n - i);
	return p + n;
}
#define trace_put_STR8(p, s)  trace_put_str((p), (s), 8)
#define trace_put_STR16(p, s) trace_put_str((p), (s), 16)
#define trace_put_STR24(p, s) trace_put_str((p), (s), 24)
#define trace_put_STR32(p, s) trace_put_str((p), (s), 32)

/* trace_NAME(owner, object, related, args...) and trace_NAME_enabled(). */
#define TRACE_DEFINE_RECORD(name_, grp_, bit_, own_, obj_, fl_, rel_, doc_, args_)	\
static inline bool trace_##name_##_enabled(void)				\
{										\
	return trace_tpoint_on(TRACE_GROUP_##grp_, (bit_));			\
}										\
static inline void trace_##name_(uint32_t owner_, uint64_t object_,		\
				uint64_t related_ TRACE_PARAMS(args_))		\
{										\
	_Static_assert((bit_) < 64, #name_ ": bit must be below 64");		\
	_Static_assert(0 TRACE_SIZE(args_) <= TRACE_ARG_BYTES,			\
		       #name_ ": arguments exceed TRACE_ARG_BYTES");		\
	struct trace_entry *e_;							\
	uint8_t *p_;								\
										\
	if (__builtin_expect(!trace_tpoint_on(TRACE_GROUP_##grp_, (bit_)), 1))	\
		return;								\
	e_ = trace_entry_begin(TRACE_TP_##name_, owner_, object_, related_);	\
	if (!e_)								\
		return;								\
	p_ = e_->args;								\
	TRACE_PUTS(args_)							\
	(void)p_;								\
	trace_entry_commit();							\
}
TRACE_POINTS(TRACE_DEFINE_RECORD)
#undef TRACE_DEFINE_RECORD

/* ---- set-up, enabling, and what the control plane calls ---- */

/*
 * Parse a -e argument: "GROUP[:MASK],...", "all" or "help".  MASK (decimal
 * or 0x hex) picks tracepoints by bit; without it the whole group.  Groups
 * accumulate over several -e options.  Returns 0, 1 after printing the
 * help to stdout (the caller exits 0), or -EINVAL after one line on stderr.
 */
int trace_parse_enable(const char *spec);
void trace_print_help(FILE *out);

/* Create the shared-memory file with `threads` rings of `entries` events
 * (0: TRACE_DEFAULT_ENTRIES), and set this process's coredump_filter so
 * that a core holds the rings too.  Before any reactor starts.  0 or
 * -errno. */
int trace_init(unsigned threads, uint64_t entries);
/* Write a fresh (TSC, CLOCK_MONOTONIC) pair into the file header, so the
 * dump tool's conversion spans the run; blktgt calls it at 4 ms, 8 ms, ...
 * after start, then every second, and trace_fini() once more.  A no-op unless events record the TSC. */
void trace_clock_sync(void);
/* Check BLKTGT_TRACE_CLOCK; on a bad value print one line to stderr and
 * return -EINVAL (trace_init() refuses it too, silently). */
int trace_clock_check(void);
/* "tsc" or "monotonic": what this process's events record. */
const char *trace_clock_name(void);
/* Give the calling thread ring `index`; name is its thread name. */
int trace_thread_init(unsigned index, const char *name);
/* The calling thread stops recording (before it exits). */
void trace_thread_fini(void);
/* After every reactor has stopped: disable recording, unmap, and remove
 * the file if nothing was ever recorded in it (else it stays, for the
 * dump tool).  Returns the number of events the file holds a record of. */
uint64_t trace_fini(void);

/* Print the start-up line: where the file is and the exact dump command. */
void trace_announce(FILE *out);
const char *trace_file_path(void);       /* "" before trace_init */
const char *trace_dump_command(void);    /* "" before trace_init */

/* Enable tracepoints of a group ("all": every group); mask 0 means every
 * tracepoint of the group.  Disable turns the whole group off.
 * 0, -ENOENT (no such group) or -EINVAL (mask names no tracepoint). */
int trace_enable_group(const char *name, uint64_t mask);
int trace_disable_group(const char *name);
/* True when some tracepoint is enabled. */
bool trace_any_enabled(void);
/* The group's enabled mask, or -ENOENT. */
int trace_group_mask(const char *name, uint64_t *mask);

#endif
