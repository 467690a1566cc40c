// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace.c: the trace ring's shared-memory file, its self-description, and
 * enabling groups (-e at start, RPCs at run time).  The record path itself
 * is inline, in trace.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace.h"

_Static_assert(sizeof(struct trace_file_header) == 320, "file header layout");
_Static_assert(offsetof(struct trace_file_header, group_masks) == 104, "file header layout");
_Static_assert(offsetof(struct trace_file_header, cal_start) == 240, "file header layout");
_Static_assert(sizeof(struct trace_ring_header) == 64, "ring header layout");
_Static_assert(sizeof(struct trace_entry) == 64, "entry layout");
_Static_assert(offsetof(struct trace_entry, args) == 64 - TRACE_ARG_BYTES, "entry layout");
_Static_assert(TRACE_GROUP_COUNT <= TRACE_MAX_GROUPS, "too many groups");

uint64_t trace_group_masks[TRACE_GROUP_COUNT];
__thread struct trace_local trace_tls;
bool trace_clock_tsc;

struct trace_arg_def {
	const char *name;
	const char *kind;
	unsigned size;
};

struct trace_tp_def {
	const char *name;
	const char *doc;
	unsigned id, group, bit, owner, object, related, flags;
	const struct trace_arg_def *args;
	unsigned nargs;
};

struct trace_name_def {
	const char *name;
	const char *doc;                /* groups only */
	unsigned index;
	char letter;                    /* owners and objects */
};

#define TRACE_DESCS(seq)    TRACE_SEQ_END(TRACE_DESCS_A seq)
#define TRACE_DESCS_A(t, n) { #n, TRACE_KIND_##t, TRACE_SIZE_##t }, TRACE_DESCS_B
#define TRACE_DESCS_B(t, n) { #n, TRACE_KIND_##t, TRACE_SIZE_##t }, TRACE_DESCS_A
#define TRACE_DESCS_A_END
#define TRACE_DESCS_B_END

/* One argument table per tracepoint; a sentinel keeps empty ones legal. */
#define TRACE_T_ARGS(name_, grp_, bit_, own_, obj_, fl_, rel_, doc_, args_) \
	static const struct trace_arg_def trace_args_##name_[] = { TRACE_DESCS(args_) { NULL, NULL, 0 } };
TRACE_POINTS(TRACE_T_ARGS)
#undef TRACE_T_ARGS

static const struct trace_tp_def trace_tps[] = {
#define TRACE_T_DEF(name_, grp_, bit_, own_, obj_, fl_, rel_, doc_, args_) \
	{ .name = #name_, .doc = doc_, .id = TRACE_TP_##name_, .group = TRACE_GROUP_##grp_, \
	  .bit = (bit_), .owner = TRACE_OWNER_##own_, .object = TRACE_OBJECT_##obj_, \
	  .related = TRACE_OBJECT_##rel_, .flags = (fl_), .args = trace_args_##name_, \
	  .nargs = sizeof(trace_args_##name_) / sizeof(trace_args_##name_[0]) - 1 },
	TRACE_POINTS(TRACE_T_DEF)
#undef TRACE_T_DEF
};

static const struct trace_name_def trace_groups[] = {
#define TRACE_G_DEF(name_, index_, doc_) { .name = #name_, .doc = doc_, .index = (index_) },
	TRACE_GROUPS(TRACE_G_DEF)
#undef TRACE_G_DEF
};

static const struct trace_name_def trace_owners[] = {
#define TRACE_O_DEF(name_, index_, letter_) { .name = #name_, .index = (index_), .letter = (letter_) },
	TRACE_OWNERS(TRACE_O_DEF)
#undef TRACE_O_DEF
};

static const struct trace_name_def trace_objects[] = {
#define TRACE_J_DEF(name_, index_, letter_) { .name = #name_, .index = (index_), .letter = (letter_) },
	TRACE_OBJECTS(TRACE_J_DEF)
#undef TRACE_J_DEF
};

#define TRACE_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Never called: it exists so that two tracepoints with the same group and
 * bit, or two groups with the same index, fail to compile (duplicate case). */
static __attribute__((unused)) void trace_defs_unique(unsigned v)
{
	switch (v) {
#define TRACE_T_CASE(name_, grp_, bit_, own_, obj_, fl_, rel_, doc_, args_) case TRACE_TP_##name_:
	TRACE_POINTS(TRACE_T_CASE)
#undef TRACE_T_CASE
		break;
	}
	switch (v) {
#define TRACE_G_CASE(name, index, doc) case (index):
	TRACE_GROUPS(TRACE_G_CASE)
#undef TRACE_G_CASE
		break;
	}
}

/* The state of the file, set up by trace_init() on the main thread. */
static struct {
	struct trace_file_header *hdr;  /* NULL: no file */
	size_t size;
	unsigned threads;
	char path[64];
	char dump[PATH_MAX + 64];
} trace;

/* ---- groups and masks ---- */

static int trace_group_find(const char *name, size_t len)
{
	for (size_t i = 0; i < TRACE_COUNT(trace_groups); i++)
		if (strlen(trace_groups[i].name) == len &&
		    !memcmp(trace_groups[i].name, name, len))
			return (int)trace_groups[i].index;
	return -ENOENT;
}

/* Every tracepoint bit that group g defines. */
static uint64_t trace_group_defined(unsigned g)
{
	uint64_t m = 0;

	for (size_t i = 0; i < TRACE_COUNT(trace_tps); i++)
		if (trace_tps[i].group == g)
			m |= 1ull << trace_tps[i].bit;
	return m;
}

static void trace_mask_store(unsigned g, uint64_t mask)
{
	__atomic_store_n(&trace_group_masks[g], mask, __ATOMIC_RELAXED);
	if (trace.hdr)
		__atomic_store_n(&trace.hdr->group_masks[g], mask, __ATOMIC_RELAXED);
}

static uint64_t trace_mask_load(unsigned g)
{
	return __atomic_load_n(&trace_group_masks[g], __ATOMIC_RELAXED);
}

int trace_enable_group(const char *name, uint64_t mask)
{
	int g;

	if (!strcmp(name, "all")) {
		if (mask)
			return -EINVAL;
		for (unsigned i = 0; i < TRACE_GROUP_COUNT; i++)
			trace_mask_store(i, trace_group_defined(i));
		return 0;
	}
	g = trace_group_find(name, strlen(name));
	if (g < 0)
		return g;
	if (!mask)
		mask = trace_group_defined((unsigned)g);
	if (mask & ~trace_group_defined((unsigned)g))
		return -EINVAL;
	trace_mask_store((unsigned)g, trace_mask_load((unsigned)g) | mask);
	return 0;
}

int trace_disable_group(const char *name)
{
	int g;

	if (!strcmp(name, "all")) {
		for (unsigned i = 0; i < TRACE_GROUP_COUNT; i++)
			trace_mask_store(i, 0);
		return 0;
	}
	g = trace_group_find(name, strlen(name));
	if (g < 0)
		return g;
	trace_mask_store((unsigned)g, 0);
	return 0;
}

int trace_group_mask(const char *name, uint64_t *mask)
{
	int g = trace_group_find(name, strlen(name));

	if (g < 0)
		return g;
	*mask = trace_mask_load((unsigned)g);
	return 0;
}

void trace_print_help(FILE *out)
{
	fprintf(out, "usage: -e GROUP[:MASK][,GROUP[:MASK]...] | all | help\n"
		"  MASK (decimal or 0x hex) picks tracepoints by bit; default: all of the group.\n"
		"  At run time: rpc.py trace_enable_group NAME / trace_disable_group NAME.\n");
	for (size_t g = 0; g < TRACE_COUNT(trace_groups); g++) {
		unsigned gi = trace_groups[g].index;

		fprintf(out, "\ngroup %s (mask 0x%" PRIx64 "): %s\n", trace_groups[g].name,
			trace_group_defined(gi), trace_groups[g].doc);
		for (size_t i = 0; i < TRACE_COUNT(trace_tps); i++) {
			const struct trace_tp_def *t = &trace_tps[i];

			if (t->group != gi)
				continue;
			fprintf(out, "  0x%-4" PRIx64 " %-16s", (uint64_t)1 << t->bit, t->name);
			for (unsigned a = 0; a < t->nargs; a++)
				fprintf(out, "%s%s", a ? ", " : "(", t->args[a].name);
			fprintf(out, "%s  %s\n", t->nargs ? ")" : "()", t->doc);
		}
	}
}

/* Strict: decimal or 0x hex, all digits, no overflow, not 0. */
static int trace_parse_mask(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end != '\0' || v == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

int trace_parse_enable(const char *spec)
{
	uint64_t want[TRACE_GROUP_COUNT] = { 0 };
	char buf[TRACE_SPEC_MAX + 1];
	char *save = NULL, *item;
	size_t len = strnlen(spec, TRACE_SPEC_MAX + 1);

	if (len == 0 || len > TRACE_SPEC_MAX) {
		fprintf(stderr, "blktgt: -e: want GROUP[:MASK],... | all | help "
			"(at most %d characters)\n", TRACE_SPEC_MAX);
		return -EINVAL;
	}
	if (!strcmp(spec, "help")) {
		trace_print_help(stdout);
		return 1;
	}
	memcpy(buf, spec, len + 1);
	/* Parse everything first, so a bad item enables nothing. */
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':');
		size_t nlen = colon ? (size_t)(colon - item) : strlen(item);
		uint64_t mask = 0, defined;
		int g;

		if (!colon && !strcmp(item, "all")) {
			for (unsigned i = 0; i < TRACE_GROUP_COUNT; i++)
				want[i] = trace_group_defined(i);
			continue;
		}
		g = trace_group_find(item, nlen);
		if (g < 0) {
			fprintf(stderr, "blktgt: -e: no trace group '%.*s' (-e help lists them)\n",
				(int)nlen, item);
			return -EINVAL;
		}
		defined = trace_group_defined((unsigned)g);
		if (colon && trace_parse_mask(colon + 1, &mask)) {
			fprintf(stderr, "blktgt: -e: '%s': MASK must be a non-zero number "
				"(decimal or 0x hex)\n", item);
			return -EINVAL;
		}
		if (!colon)
			mask = defined;
		if (mask & ~defined) {
			fprintf(stderr, "blktgt: -e: '%s': group %.*s has no tracepoint in "
				"mask 0x%" PRIx64 " (defined: 0x%" PRIx64 ")\n", item, (int)nlen,
				item, mask & ~defined, defined);
			return -EINVAL;
		}
		want[g] |= mask;
	}
	for (unsigned i = 0; i < TRACE_GROUP_COUNT; i++)
		if (want[i])
			trace_mask_store(i, trace_mask_load(i) | want[i]);
	return 0;
}

/* ---- the definition table: JSON, read back by the dump tool ---- */

struct trace_buf {
	char *p;
	size_t len, cap;
	int err;
};

static void tb_printf(struct trace_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void tb_printf(struct trace_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->cap - b->len)
		b->err = -ENOSPC;
	else
		b->len += (size_t)n;
}

/* A JSON string; the names and docs are ours, but escape them anyway. */
static void tb_str(struct trace_buf *b, const char *s)
{
	tb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			tb_printf(b, "\\%c", c);
		else if (c < 0x20)
			tb_printf(b, "\\u%04x", c);
		else
			tb_printf(b, "%c", c);
	}
	tb_printf(b, "\"");
}

static void tb_names(struct trace_buf *b, const char *key,
		     const struct trace_name_def *d, size_t n, bool letters)
{
	tb_printf(b, "\"%s\":[", key);
	for (size_t i = 0; i < n; i++) {
		tb_printf(b, "%s{\"name\":", i ? "," : "");
		tb_str(b, d[i].name);
		tb_printf(b, ",\"index\":%u", d[i].index);
		if (letters)
			tb_printf(b, ",\"letter\":\"%c\"", d[i].letter);
		else {
			tb_printf(b, ",\"doc\":");
			tb_str(b, d[i].doc);
		}
		tb_printf(b, "}");
	}
	tb_printf(b, "]");
}

static int trace_defs_json(char *out, size_t cap, size_t *len)
{
	struct trace_buf b = { .p = out, .cap = cap };

	tb_printf(&b, "{\"arg_bytes\":%d,", TRACE_ARG_BYTES);
	tb_names(&b, "groups", trace_groups, TRACE_COUNT(trace_groups), false);
	tb_printf(&b, ",");
	tb_names(&b, "owners", trace_owners, TRACE_COUNT(trace_owners), true);
	tb_printf(&b, ",");
	tb_names(&b, "objects", trace_objects, TRACE_COUNT(trace_objects), true);
	tb_printf(&b, ",\"tracepoints\":[");
	for (size_t i = 0; i < TRACE_COUNT(trace_tps); i++) {
		const struct trace_tp_def *t = &trace_tps[i];
		unsigned off = 0;

		tb_printf(&b, "%s{\"name\":", i ? "," : "");
		tb_str(&b, t->name);
		tb_printf(&b, ",\"id\":%u,\"group\":%u,\"bit\":%u,\"owner\":%u,"
			  "\"object\":%u,\"new_object\":%s,\"related\":%u,\"doc\":",
			  t->id, t->group, t->bit, t->owner, t->object,
			  (t->flags & TRACE_NEW_OBJECT) ? "true" : "false", t->related);
		tb_str(&b, t->doc);
		tb_printf(&b, ",\"args\":[");
		for (unsigned a = 0; a < t->nargs; a++) {
			tb_printf(&b, "%s{\"name\":", a ? "," : "");
			tb_str(&b, t->args[a].name);
			tb_printf(&b, ",\"type\":\"%s\",\"size\":%u,\"offset\":%u}",
				  t->args[a].kind, t->args[a].size, off);
			off += t->args[a].size;
		}
		tb_printf(&b, "]}");
	}
	tb_printf(&b, "]}");
	*len = b.len;
	return b.err;
}

/* ---- the file ---- */

static uint64_t trace_clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t trace_align(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* ---- the clock ---- */

/*
 * The counter (the TSC, CNTVCT_EL0) is worth using only where the kernel
 * trusts it for its own clock: then it runs at a constant rate, through
 * idle states, in step on every CPU, which is what lets events of
 * different reactors be ordered by it.  BLKTGT_TRACE_CLOCK=monotonic opts
 * out; =tsc (=cntvct on arm64: TRACE_COUNTER_NAME) insists.
 */
#if TRACE_HAVE_COUNTER
static bool trace_kernel_clock_is_tsc(void)
{
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	char cs[32] = "";
	bool tsc = false;

	if (f) {
		if (fgets(cs, sizeof(cs), f))
			tsc = !strcmp(cs, TRACE_COUNTER_CLOCKSOURCE "\n");
		fclose(f);
	}
	return tsc;
}
#endif

static int trace_clock_choose(bool *tsc, bool say)
{
	const char *env = getenv(TRACE_CLOCK_ENV);

	*tsc = false;
	if (env && *env && strcmp(env, "monotonic") && strcmp(env, TRACE_COUNTER_NAME)) {
		if (say)
			fprintf(stderr, "blktgt: %s=%.32s: expected '" TRACE_COUNTER_NAME
				"' or 'monotonic'\n", TRACE_CLOCK_ENV, env);
		return -EINVAL;
	}
	if (env && !strcmp(env, "monotonic"))
		return 0;
#if TRACE_HAVE_COUNTER
	if (env && !strcmp(env, TRACE_COUNTER_NAME)) {
		*tsc = true;
		return 0;
	}
	*tsc = trace_kernel_clock_is_tsc();
	return 0;
#else
	if (env && !strcmp(env, TRACE_COUNTER_NAME)) {
		if (say)
			fprintf(stderr, "blktgt: %s=%s: this build has no counter reader\n",
				TRACE_CLOCK_ENV, TRACE_COUNTER_NAME);
		return -EINVAL;
	}
	return 0;
#endif
}

int trace_clock_check(void)
{
	bool tsc;

	return trace_clock_choose(&tsc, true);
}

/* Both clocks at the same instant: the TSC read halfway through a
 * CLOCK_MONOTONIC read, from the tightest of a few tries (a try the
 * scheduler or an interrupt split is wide and loses). */
static void trace_clock_pair(struct trace_clock_pair *p)
{
#if TRACE_HAVE_COUNTER
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 8; i++) {
		uint64_t t0 = trace_counter();
		uint64_t ns = trace_now_ns();
		uint64_t t1 = trace_counter();

		if (t1 - t0 < best) {
			best = t1 - t0;
			p->tsc = t0 + (t1 - t0) / 2;
			p->mono_ns = ns;
		}
	}
#else
	p->tsc = p->mono_ns = trace_now_ns();
#endif
}

/* Fill the slot cal_last does not name, then name it. */
static void trace_clock_store(struct trace_file_header *h, const struct trace_clock_pair *p)
{
	uint32_t next = !__atomic_load_n(&h->cal_last, __ATOMIC_RELAXED);

	__atomic_store_n(&h->cal[next].tsc, p->tsc, __ATOMIC_RELAXED);
	__atomic_store_n(&h->cal[next].mono_ns, p->mono_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&h->cal_last, next, __ATOMIC_RELEASE);
}

void trace_clock_sync(void)
{
	struct trace_file_header *h = __atomic_load_n(&trace.hdr, __ATOMIC_ACQUIRE);
	struct trace_clock_pair p;

	if (!h || !trace_clock_tsc)
		return;
	trace_clock_pair(&p);
	trace_clock_store(h, &p);
}

const char *trace_clock_name(void)
{
	return trace_clock_tsc ? TRACE_COUNTER_NAME : "monotonic";
}

/*
 * A first slope, for a file whose writer dies before its first
 * trace_clock_sync(): a second pair 2 ms after the first.  The error of a
 * pair is about one TSC read (~25 ns here), so this slope is good to ~1e-5,
 * 10 us over a second; each later pair spans more time and does better.
 */
static void trace_clock_calibrate(struct trace_file_header *h)
{
	struct trace_clock_pair p;
	uint64_t until;

	trace_clock_pair(&h->cal_start);
	until = h->cal_start.mono_ns + 2000000;
	while (trace_now_ns() < until)
		;
	trace_clock_pair(&p);
	h->cal[0] = p;
	h->cal[1] = p;
	h->cal_last = 0;
}

/* The dump tool sits beside the binary ($(O)/bin); name it by its full
 * path when it is there, so the printed command runs as it stands. */
static void trace_make_dump_command(void)
{
	char exe[PATH_MAX], tool[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	snprintf(trace.dump, sizeof(trace.dump), "blktgt-trace -p %d", (int)getpid());
	if (n <= 0)
		return;
	exe[n] = '\0';
	snprintf(tool, sizeof(tool), "%s/blktgt-trace", dirname(exe));
	if (access(tool, X_OK) == 0)
		snprintf(trace.dump, sizeof(trace.dump), "%s -p %d", tool, (int)getpid());
}

bool trace_any_enabled(void)
{
	for (unsigned i = 0; i < TRACE_GROUP_COUNT; i++)
		if (trace_mask_load(i))
			return true;
	return false;
}

/*
 * A core should carry the ring: what was it doing just before it crashed?
 * The ring is a file-backed shared mapping, which the kernel dumps only
 * with bit 3 of /proc/PID/coredump_filter; the default, 0x33, leaves it
 * out.  Set that bit and keep the others.  blktgt has no other shared file
 * mapping, so nothing else grows the core.  Failing here costs only the
 * ring in a core, so it is a warning, not an error.
 */
static void trace_keep_in_core(void)
{
	const char *path = "/proc/self/coredump_filter";
	char buf[32];
	unsigned long v;
	ssize_t n;
	char *end;
	int fd, len;

	errno = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		goto fail;
	buf[n] = '\0';
	v = strtoul(buf, &end, 16);
	if (end == buf)
		goto fail;
	if (v & TRACE_COREDUMP_SHARED_FILE)
		return;
	len = snprintf(buf, sizeof(buf), "0x%lx", v | TRACE_COREDUMP_SHARED_FILE);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	n = write(fd, buf, (size_t)len);
	close(fd);
	if (n == len)
		return;
fail:
	fprintf(stderr, "blktgt: trace ring: cannot set bit 3 of %s (%s): a core "
		"will not hold the ring\n", path, strerror(errno ? errno : EIO));
}

int trace_init(unsigned threads, uint64_t entries)
{
	char defs[TRACE_DEFS_MAX];
	size_t defs_len, ring_offset, stride, size;
	struct trace_file_header *h;
	bool tsc;
	int fd, rc, flags;
	void *map;

	if (trace.hdr)
		return -EALREADY;
	if (!entries)
		entries = TRACE_DEFAULT_ENTRIES;
	rc = trace_clock_choose(&tsc, false);
	if (rc)
		return rc;
	if (threads < 1 || threads > TRACE_MAX_THREADS ||
	    entries < TRACE_MIN_ENTRIES || entries > TRACE_MAX_ENTRIES ||
	    (entries & (entries - 1)))
		return -EINVAL;
	rc = trace_defs_json(defs, sizeof(defs), &defs_len);
	if (rc)
		return rc;

	ring_offset = trace_align(sizeof(*h) + defs_len, 4096);
	stride = trace_align(sizeof(struct trace_ring_header) +
			     entries * sizeof(struct trace_entry), 4096);
	size = ring_offset + threads * stride;

	snprintf(trace.path, sizeof(trace.path), TRACE_PATH_FMT, (int)getpid());
	/* A file left by a dead process that had our pid is stale. */
	if (unlink(trace.path) && errno != ENOENT)
		return -errno;
	fd = open(trace.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size)) {
		rc = -errno;
		goto fail_fd;
	}
	/* Fault the rings in now when recording starts at once, so the first
	 * lap around a ring does not take page faults on the I/O path. */
	flags = MAP_SHARED | (trace_any_enabled() ? MAP_POPULATE : 0);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, fd, 0);
	if (map == MAP_FAILED) {
		rc = -errno;
		goto fail_fd;
	}
	close(fd);
	trace_keep_in_core();

	h = map;
	h->version = TRACE_VERSION;
	h->header_size = sizeof(*h);
	h->file_size = size;
	h->entry_size = sizeof(struct trace_entry);
	h->ring_count = threads;
	h->ring_entries = entries;
	h->ring_offset = ring_offset;
	h->ring_stride = stride;
	h->ring_header_size = sizeof(struct trace_ring_header);
	h->arg_bytes = TRACE_ARG_BYTES;
	h->defs_offset = sizeof(*h);
	h->defs_size = (uint32_t)defs_len;
	h->pid = (uint32_t)getpid();
	h->group_count = TRACE_GROUP_COUNT;
	h->start_mono_ns = trace_clock_ns(CLOCK_MONOTONIC);
	h->start_real_ns = trace_clock_ns(CLOCK_REALTIME);
	h->clock = tsc ? TRACE_CLOCK_TSC : TRACE_CLOCK_MONOTONIC;
	if (tsc) {
		trace_clock_calibrate(h);
	} else {
		h->cal_start.tsc = h->cal_start.mono_ns = h->start_mono_ns;
		h->cal[0] = h->cal[1] = h->cal_start;
	}
	trace_clock_tsc = tsc;
	memcpy((char *)map + h->defs_offset, defs, defs_len);
	for (unsigned i = 0; i < threads; i++) {
		struct trace_ring_header *r = (void *)((char *)map + ring_offset + i * stride);

		r->index = i;
	}
	__atomic_store_n(&trace.hdr, h, __ATOMIC_RELEASE);
	trace.size = size;
	trace.threads = threads;
	for (unsigned i = 0; i < TRACE_GROUP_COUNT; i++)
		h->group_masks[i] = trace_mask_load(i);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, TRACE_MAGIC, sizeof(h->magic));
	trace_make_dump_command();
	return 0;

fail_fd:
	close(fd);
	unlink(trace.path);
	return rc;
}

int trace_thread_init(unsigned index, const char *name)
{
	struct trace_ring_header *r;

	if (!trace.hdr)
		return -ENODEV;
	if (index >= trace.threads)
		return -EINVAL;
	r = (void *)((char *)trace.hdr + trace.hdr->ring_offset + index * trace.hdr->ring_stride);
	r->tid = (int32_t)gettid();
	memset(r->name, 0, sizeof(r->name));
	strncpy(r->name, name ? name : "", sizeof(r->name) - 1);
	trace_tls.hdr = r;
	trace_tls.mask = trace.hdr->ring_entries - 1;
	trace_tls.head = r->written;
	trace_tls.entries = (struct trace_entry *)(r + 1);
	return 0;
}

void trace_thread_fini(void)
{
	memset(&trace_tls, 0, sizeof(trace_tls));
}

void trace_count_lost(void)
{
	struct trace_file_header *h = __atomic_load_n(&trace.hdr, __ATOMIC_ACQUIRE);

	if (h)
		__atomic_fetch_add(&h->lost, 1, __ATOMIC_RELAXED);
}

uint64_t trace_fini(void)
{
	struct trace_file_header *h = trace.hdr;
	uint64_t total;

	for (unsigned i = 0; i < TRACE_GROUP_COUNT; i++)
		__atomic_store_n(&trace_group_masks[i], 0, __ATOMIC_RELAXED);
	trace_thread_fini();
	if (!h)
		return 0;
	trace_clock_sync();
	total = __atomic_load_n(&h->lost, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < trace.threads; i++) {
		struct trace_ring_header *r =
			(void *)((char *)h + h->ring_offset + i * h->ring_stride);

		total += __atomic_load_n(&r->written, __ATOMIC_ACQUIRE);
	}
	__atomic_store_n(&trace.hdr, NULL, __ATOMIC_RELEASE);
	trace_clock_tsc = false;
	munmap(h, trace.size);
	if (total == 0)
		unlink(trace.path);
	return total;
}

void trace_announce(FILE *out)
{
	bool any = false;

	if (!trace.hdr)
		return;
	fprintf(out, "blktgt: trace ring %s (%u threads x %" PRIu64 " slots), groups ",
		trace.path, trace.threads, trace.hdr->ring_entries);
	for (size_t g = 0; g < TRACE_COUNT(trace_groups); g++) {
		uint64_t m = trace_mask_load(trace_groups[g].index);

		if (!m)
			continue;
		fprintf(out, "%s%s", any ? "," : "", trace_groups[g].name);
		if (m != trace_group_defined(trace_groups[g].index))
			fprintf(out, ":0x%" PRIx64, m);
		any = true;
	}
	fprintf(out, "%s; dump: %s\n", any ? "" : "none (enable: -e GROUP or trace_enable_group)",
		trace.dump);
	fflush(out);
}

const char *trace_file_path(void)
{
	return trace.path;
}

const char *trace_dump_command(void)
{
	return trace.dump;
}
