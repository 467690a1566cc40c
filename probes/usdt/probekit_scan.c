// SPDX-License-Identifier: BSD-2-Clause
/* probekit-scan: the ELF and script work of probekit-bpftrace
 * (wrapper/bpftrace.sh), in one quick process instead of awk over readelf.
 * Not a user command: its output formats are the wrapper's.
 *
 *   probekit-scan join PID READY DURATION EXE SCRIPT...
 *	Join bpftrace scripts into one program (see "joining scripts").
 *	An empty PID traces a file, not a process: READY is then the whole
 *	readiness line and a script's __PID__ is an error.  EXE may be the
 *	file itself rather than a link to it.
 *	Prints the target of the link EXE (/proc/PID/exe) as "LEN:TARGET",
 *	or "-" when it cannot be read, and \002 (neither when EXE is ""),
 *	the references "N<TAB>KIND<TAB>SPEC\n"..., \002, those of
 *	them that the ELF file EXE has ("N 0\n"..., as has prints them; none
 *	when EXE is ""), \002, the line map "PROGRAM_LINE FILE LINE\n"...,
 *	\002, then the program.  One run does what the wrapper needs when
 *	the executable holds every probe.
 *   probekit-scan has FILE...
 *	Read the want-list "N<TAB>usdt|syms<TAB>SPEC\n"... on stdin; print
 *	"N I\n" for each reference, with I the index of the first FILE that
 *	has it.  Files are read in order until every reference is found.
 *   probekit-scan nearest SPEC FILE...
 *	For a usdt SPEC none of the FILEs has: "I<TAB>PROVIDER:NAME", the
 *	nearest probe by edit distance and the index of its FILE, when it is
 *	near enough to be what was meant.
 *   probekit-scan build-id FILE
 *	The target of the link FILE as join prints it, \002, then FILE's
 *	GNU build-id in hex (nothing when it has none or is not ELF).
 *   probekit-scan notes FILE
 *	Its USDT notes, one a line: provider, name, pc, pc_off, sema,
 *	sema_off (hex) and spec, tab-separated.
 *   probekit-scan args [--machine aarch64|x86_64] SPEC
 *	The arguments of a spec of a file of that machine (x86_64 unless
 *	given), one a line: kind, size, signed, val, reg, readable by
 *	bpftrace, readable by libbpf, index register, scale.
 *
 * Every failure is one line on stderr, prefixed as the wrapper's own, and
 * exit status 1. */

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "usdt_notes.h"

#define PROG "probekit-bpftrace"
/* Limits on what comes from outside: a script, a want-list entry. */
#define SCRIPT_MAX (4u << 20)
#define WANT_MAX 4096
#define SPEC_LEN_MAX 1024

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* One line on stderr, and exit 1.  The line is escaped whole (a path, a
 * script's name or a probe name in it may hold a newline), so that it
 * stays one line. */
static void die(const char *fmt, ...)
{
	char line[8192], shown[4 * sizeof(line)];
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, PROG ": %s\n", usdt_escape(line, shown, sizeof(shown)));
	exit(1);
}

/* --- growing strings ---------------------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (b->len + n + 1 > cap)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			die("out of memory");
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	buf_add(b, tmp, n < (int)sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void buf_cat(struct buf *b, const struct buf *s)
{
	if (s->len)
		buf_add(b, s->p, s->len);
}

struct want;
static void find_in_files(struct want *w, int nw, char **files, int nfiles);
static struct want *wants_from_refs(const struct buf *refs, int *nw);

/* --- joining scripts ------------------------------------------------------------ *
 *
 * One pass over each script's text that knows strings and comments: it
 * finds the top-level blocks, merges BEGIN and END bodies (bpftrace accepts
 * one of each), hoists C definitions (#-lines, struct, union, enum) to the
 * top, and replaces each __EXE__ of an attach point with a marker \001N\001
 * for reference N, and __PID__ with the PID (before any path is inserted, so
 * never in a path).
 *
 * The line map lets bpftrace's "stdin:LINE:..." errors name the script's
 * FILE:LINE.  While joining, each piece carries a mark \003F:L\003 at each
 * of its line starts (F: the script's index from 1, L: its line); a piece
 * moved out of its line (a BEGIN or END body, a struct) starts on a line of
 * its own, indented so that bpftrace's columns stay the script's.  At the
 * end the marks are taken out, and each run of program lines that follow
 * one script's lines in order becomes one map line (F 0: the wrapper's). */

struct joiner {
	const char *pid, *ready, *duration;
	const char *max_rate;	/* --max-rate's budget, or "" */
	unsigned max_cpu;	/* the highest possible CPU, for its sum */
	struct buf defs, body, merged[2], refs;
	bool seen[2];
	int nrefs;
	/* The script being read. */
	const char *s, *path;
	size_t n;
	int fidx;
	char name[64];
	size_t lp;	/* line_at's last position, and its line */
	long ll;
};

static const char *const KEYS[2] = {"BEGIN", "END"};

/* The index after the string, comment or character at i. */
static size_t skip(const char *s, size_t i, size_t n)
{
	const char *e;

	if (s[i] == '"') {
		for (i++; i < n; i++) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				return i + 1;
		}
		return n;
	}
	if (i + 1 < n && s[i] == '/' && s[i + 1] == '/') {
		e = memchr(s + i, '\n', n - i);
		return e ? (size_t)(e - s) + 1 : n;
	}
	if (i + 1 < n && s[i] == '/' && s[i + 1] == '*') {
		e = memmem(s + i + 2, n - i - 2, "*/", 2);
		return e ? (size_t)(e - s) + 2 : n;
	}
	return i + 1;
}

static bool is_comment(const char *s, size_t i, size_t n)
{
	return i + 1 < n && s[i] == '/' && (s[i + 1] == '/' || s[i + 1] == '*');
}

/* The line position p is on (the scan mostly moves forward, so newlines
 * are counted from the last position asked for). */
static long line_at(struct joiner *j, size_t p)
{
	if (p < j->lp) {
		j->lp = 0;
		j->ll = 1;
	}
	for (; j->lp < p; j->lp++)
		if (j->s[j->lp] == '\n')
			j->ll++;
	return j->ll;
}

static void add_mark(struct joiner *j, struct buf *out, long line)
{
	buf_printf(out, "\003%d:%ld\003", j->fidx, line);
}

/* s[a, b) onto out, with a line mark at each line start in it. */
static void copy(struct joiner *j, struct buf *out, size_t a, size_t b)
{
	const char *s = j->s, *nl;
	long l;

	if (b <= a)
		return;
	l = line_at(j, a);
	if (a == 0 || s[a - 1] == '\n')
		add_mark(j, out, l);
	while ((nl = memchr(s + a, '\n', b - a)) && (size_t)(nl - s) + 1 < b) {
		buf_add(out, s + a, (size_t)(nl - s) + 1 - a);
		add_mark(j, out, ++l);
		a = (size_t)(nl - s) + 1;
	}
	buf_add(out, s + a, b - a);
}

/* What starts a piece moved from p onto a line of its own: the mark of
 * p's line, and blanks as wide as the text before p (tabs kept). */
static void at(struct joiner *j, struct buf *out, size_t p)
{
	size_t b = p;

	if (p == 0 || j->s[p - 1] == '\n')
		return;
	while (b > 0 && j->s[b - 1] != '\n')
		b--;
	add_mark(j, out, line_at(j, p));
	for (; b < p; b++)
		buf_add(out, j->s[b] == '\t' ? "\t" : " ", 1);
}

static bool is_ident(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/* The attach-point kind that ends just before ":__EXE__" at h[i], or NULL. */
static const char *exe_kind(const char *h, size_t i, size_t n)
{
	static const char *const kinds[] = {"uretprobe", "uprobe", "usdt", "ur", "U", "u"};
	size_t k, len;

	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		len = strlen(kinds[k]);
		if (i + len + 8 <= n && !memcmp(h + i, kinds[k], len) &&
		    !memcmp(h + i + len, ":__EXE__", 8) &&
		    (i == 0 || !is_ident(h[i - 1])))
			return kinds[k];
	}
	return NULL;
}

/* A block header s[a, b) onto out, each KIND:__EXE__:SPEC of an attach
 * point (outside strings and comments) replaced by KIND:\001N\001:SPEC. */
static void mark_header(struct joiner *j, struct buf *out, size_t a, size_t b)
{
	struct buf h = {0};
	size_t i = 0, from = 0, e, len;
	const char *kind;

	copy(j, &h, a, b);
	while (i < h.len) {
		if (h.p[i] == '"' || is_comment(h.p, i, h.len)) {
			i = skip(h.p, i, h.len);
			continue;
		}
		kind = exe_kind(h.p, i, h.len);
		if (!kind) {
			i++;
			continue;
		}
		len = strlen(kind);
		e = i + len + 8;
		if (h.p[e] != ':' || !(len = strcspn(h.p + e + 1, " \t\r\n,{/")))
			die("attach point %s:__EXE__ names no probe or function", kind);
		if (len > SPEC_LEN_MAX)
			die("attach point %s:__EXE__:%.40s... is longer than %d bytes",
			    kind, h.p + e + 1, SPEC_LEN_MAX);
		j->nrefs++;
		buf_printf(&j->refs, "%d\t%s\t", j->nrefs, kind);
		buf_add(&j->refs, h.p + e + 1, len);
		buf_str(&j->refs, "\n");
		buf_add(out, h.p + from, i - from);
		buf_printf(out, "%s:\001%d\001", kind, j->nrefs);
		i = from = e;
	}
	buf_add(out, h.p + from, h.len - from);
	free(h.p);
}


/* Whether the block header s[a, b) attaches a usdt, uprobe or uretprobe
 * probe (outside comments): --max-rate counts those blocks' hits. */
static bool counts_hits(const char *s, size_t a, size_t b)
{
	static const char *const kinds[] = {"usdt:", "uprobe:", "uretprobe:", "U:", "u:", "ur:"};
	size_t i, k;

	for (i = a; i < b; ) {
		if (s[i] == '"' || is_comment(s, i, b)) {
			i = skip(s, i, b);
			continue;
		}
		if (i == a || strchr(" \t\r\n,", s[i - 1]))
			for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
				if (b - i > strlen(kinds[k]) && !strncmp(s + i, kinds[k], strlen(kinds[k])))
					return true;
		i++;
	}
	return false;
}

/* The header s[a, b) without comments and surrounding blanks, if it is at
 * most cap - 1 bytes (a BEGIN, END or struct header is short). */
static void header_key(const char *s, size_t a, size_t b, char *key, size_t cap)
{
	size_t len = 0, i = a, e;

	while (i < b && len + 1 < cap) {
		if (is_comment(s, i, b)) {
			i = skip(s, i, b);
			key[len++] = ' ';
			continue;
		}
		e = skip(s, i, b);
		while (i < e && len + 1 < cap)
			key[len++] = s[i++];
		i = e;
	}
	key[len] = '\0';
	while (len && strchr(" \t\r\n", key[len - 1]))
		key[--len] = '\0';
	e = strspn(key, " \t\r\n");
	memmove(key, key + e, len - e + 1);
}

static bool is_def(const char *key)
{
	static const char *const words[] = {"struct", "union", "enum"};
	size_t k, len;

	for (k = 0; k < 3; k++) {
		len = strlen(words[k]);
		if (!strncmp(key, words[k], len) && key[len] && strchr(" \t\r\n", key[len]))
			return true;
	}
	return false;
}

static void join_one(struct joiner *j)
{
	const char *s = j->s, *e;
	size_t n = j->n, i = 0, start, k, hb;
	int depth, key;
	char hdr[64];

	if (memchr(s, '\001', n) || memchr(s, '\002', n) || memchr(s, '\003', n))
		die("script %s contains control characters \\001, \\002 or \\003, which the wrapper uses as markers",
		    j->path);
	j->lp = 0;
	j->ll = 1;
	if (n >= 2 && s[0] == '#' && s[1] == '!') {	/* a shebang line, valid only first */
		e = memchr(s, '\n', n);
		i = e ? (size_t)(e - s) : n;
	}
	while (i < n) {
		bool bol = i == 0 || s[i - 1] == '\n';

		if (strchr(" \t\r\n;", s[i])) {
			copy(j, &j->body, i, i + 1);
			i++;
			continue;
		}
		if (s[i] == '#' && bol) {		/* a preprocessor line */
			e = memchr(s + i, '\n', n - i);
			k = e ? (size_t)(e - s) + 1 : n;
			copy(j, &j->defs, i, k);
			i = k;
			continue;
		}
		if (is_comment(s, i, n)) {
			k = skip(s, i, n);
			copy(j, &j->body, i, k);
			i = k;
			continue;
		}
		/* A block: its header up to the first top-level "{", then its body. */
		start = i;
		while (i < n && s[i] != '{')
			i = skip(s, i, n);
		if (i >= n) {
			copy(j, &j->body, start, n);
			break;
		}
		hb = i;
		for (depth = 1, k = i + 1; k < n; ) {
			if (s[k] == '{')
				depth++;
			else if (s[k] == '}' && --depth == 0)
				break;
			k = skip(s, k, n);
		}
		if (depth > 0) {
			header_key(s, start, hb, hdr, 41);
			die("script %s: a block starting at \"%s\" has no closing brace", j->path, hdr);
		}
		header_key(s, start, hb, hdr, sizeof(hdr));
		key = !strcmp(hdr, "BEGIN") ? 0 : !strcmp(hdr, "END") ? 1 : -1;
		if (key >= 0) {
			if (!j->seen[key]) {
				j->seen[key] = true;
				buf_printf(&j->body, "\002%s\002", KEYS[key]);
			}
			buf_printf(&j->merged[key], "\t// from %s\n", j->name);
			at(j, &j->merged[key], hb + 1);
			copy(j, &j->merged[key], hb + 1, k);
			buf_str(&j->merged[key], "\n");
		} else if (is_def(hdr)) {
			at(j, &j->defs, start);
			copy(j, &j->defs, start, k + 1);
			if (k + 1 < n && s[k + 1] == ';') {
				buf_str(&j->defs, ";");
				k++;
			}
			buf_str(&j->defs, "\n");
		} else {
			mark_header(j, &j->body, start, hb);
			if (j->max_rate[0] && counts_hits(s, start, hb)) {
				copy(j, &j->body, hb, hb + 1);
				buf_str(&j->body, " @__probekit_hits[cpu]++;");
				copy(j, &j->body, hb + 1, k + 1);
			} else {
				copy(j, &j->body, hb, k + 1);
			}
		}
		i = k + 1;
	}
}

/* The text of the script at path into *out: every line ends in a newline. */
static void read_script(const char *path, struct buf *out)
{
	char chunk[65536];
	ssize_t got;
	char why[256];
	int fd = usdt_open_regular(path, why, sizeof(why));

	out->len = 0;
	if (fd < 0)
		die("cannot read script '%s': %s", path, why);
	while ((got = read(fd, chunk, sizeof(chunk))) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			die("cannot read script '%s': %s", path, strerror(errno));
		}
		if (out->len + (size_t)got > SCRIPT_MAX)
			die("script '%s' is larger than %u bytes; is it a bpftrace script?", path, SCRIPT_MAX);
		buf_add(out, chunk, (size_t)got);
	}
	close(fd);
	if (out->len && memchr(out->p, '\0', out->len))
		die("script '%s' contains a NUL byte; is it a bpftrace script?", path);
	if (out->len && out->p[out->len - 1] != '\n')
		buf_str(out, "\n");
}

/* Replace every __PID__ in b by the PID; with no PID, any is an error. */
static void put_pids(struct buf *out, const struct buf *in, const char *pid)
{
	const char *p = in->p, *end = in->p + in->len, *hit;

	while ((hit = memmem(p, (size_t)(end - p), "__PID__", 7))) {
		if (!*pid)
			die("the script uses __PID__, but a PATH traces every process that runs it, so there is no one PID; give the PID instead of the path, or take __PID__ out of the script");
		buf_add(out, p, (size_t)(hit - p));
		buf_str(out, pid);
		p = hit + 7;
	}
	buf_add(out, p, (size_t)(end - p));
}

/* Take the marks out of the joined text, print map \002 program. */
static void emit(const struct buf *text)
{
	struct buf map = {0}, prog = {0};
	const char *p = text->p, *end = text->p + text->len, *nl, *q, *m;
	long line = 0, f, l, pf = -1, pl = 0;

	for (;;) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			nl = end;
		line++;
		f = l = 0;
		if (p < nl && *p == '\003') {
			sscanf(p + 1, "%ld:%ld", &f, &l);
			p = memchr(p + 1, '\003', (size_t)(nl - p - 1)) + 1;
		}
		for (q = p; q < nl; q = m) {
			m = memchr(q, '\003', (size_t)(nl - q));
			if (!m) {
				buf_add(&prog, q, (size_t)(nl - q));
				break;
			}
			buf_add(&prog, q, (size_t)(m - q));
			m = memchr(m + 1, '\003', (size_t)(nl - m - 1)) + 1;
		}
		if (f != pf || (f && l != pl + 1))
			buf_printf(&map, "%ld %ld %ld\n", line, f, l);
		pf = f;
		pl = l;
		if (nl == end)
			break;
		buf_str(&prog, "\n");
		p = nl + 1;
	}
	buf_printf(&map, "%ld 0 0\n", line + 1);
	fwrite(map.p, 1, map.len, stdout);
	putchar('\002');
	if (prog.len)
		fwrite(prog.p, 1, prog.len, stdout);
	free(map.p);
	free(prog.p);
}

/* The target of the link at path as "LEN:TARGET", or "-" when it cannot be
 * read: a target may hold any byte but NUL, so its length delimits it. */
static void print_link(const char *path)
{
	char target[PATH_MAX + 1];
	ssize_t len = readlink(path, target, sizeof(target));

	if (len < 0 && errno == EINVAL && strlen(path) <= PATH_MAX)
		printf("%zu:%s", strlen(path), path);	/* a file, not a link */
	else if (len < 0 || len > PATH_MAX)
		fputs("-", stdout);
	else
		printf("%zd:%.*s", len, (int)len, target);
}

static int cmd_join(int argc, char **argv)
{
	struct joiner j = {0};
	struct buf text = {0}, begin = {0}, out = {0}, pids = {0};
	const char *base, *tok;
	char *exe;
	struct want *w;
	int i, key, nw;
	size_t k;

	if (argc < 5)
		die("probekit-scan join PID READY DURATION EXE SCRIPT...");
	j.pid = argv[0];
	j.ready = argv[1];
	j.duration = argv[2];
	exe = argv[3];
	/* --max-rate comes in the environment, so the join's operands stay
	 * the same with or without it. */
	j.max_rate = getenv("PROBEKIT_MAX_RATE") ? getenv("PROBEKIT_MAX_RATE") : "";
	if (j.max_rate[0]) {
		const char *mc = getenv("PROBEKIT_MAX_CPU");
		char *end;
		unsigned long v = mc ? strtoul(mc, &end, 10) : 0;

		if (strspn(j.max_rate, "0123456789") != strlen(j.max_rate) || strlen(j.max_rate) > 10 ||
		    !mc || !*mc || *end || v > 4095)
			die("PROBEKIT_MAX_RATE wants digits and PROBEKIT_MAX_CPU a CPU number 0..4095");
		j.max_cpu = (unsigned)v;
	}
	for (i = 4; i < argc; i++) {
		read_script(argv[i], &text);
		if (!text.len)
			continue;
		j.s = text.p;
		j.n = text.len;
		j.path = argv[i];
		j.fidx = i - 3;
		base = strrchr(argv[i], '/');
		base = base ? base + 1 : argv[i];
		snprintf(j.name, sizeof(j.name), "%s", base);
		for (k = 0; j.name[k]; k++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-",
				    j.name[k]))
				j.name[k] = '?';
		join_one(&j);
	}
	/* The readiness line is the last thing BEGIN prints: bpftrace 0.17
	 * drops every event it reads after a SIGINT, and BEGIN output is read
	 * in order, so whatever the scripts print in BEGIN is out before a
	 * caller that saw this line can stop the trace. */
	buf_str(&begin, "BEGIN\n{\n");
	buf_cat(&begin, &j.merged[0]);
	/* Without a PID (a trace of every process that runs a file), READY
	 * is the whole line, %-free: it may be longer than bpftrace's 64-byte
	 * string arguments, but not than a format. */
	buf_str(&begin, "\tprintf(\"");
	buf_str(&begin, j.ready);
	buf_str(&begin, j.pid[0] ? "\\n\", __PID__);\n}" : "\\n\");\n}");
	if (!j.seen[0]) {
		buf_str(&j.body, "\n");
		buf_cat(&j.body, &begin);
		buf_str(&j.body, "\n");
	}
	if (j.duration[0])
		buf_printf(&j.body, "\ninterval:s:%s\n{\n\texit();\n}\n", j.duration);
	if (j.max_rate[0]) {
		/* Each CPU counts under its own key (no two race on one
		 * counter); once a second the sum of every possible CPU's key
		 * is checked against the budget.  bpftrace 0.17 cannot compare
		 * a count() value, hence the plain map. */
		unsigned c;

		buf_str(&j.body, "\ninterval:s:1\n{\n\t$n = @__probekit_hits[0]");
		for (c = 1; c <= j.max_cpu; c++)
			buf_printf(&j.body, " + @__probekit_hits[%u]", c);
		buf_printf(&j.body, ";\n\tif ($n - @__probekit_last > %s) {\n"
			   "\t\tprintf(\"probekit-bpftrace: %%d probe hits/s is over --max-rate %s; detaching\\n\", "
			   "$n - @__probekit_last);\n\t\texit();\n\t}\n\t@__probekit_last = $n;\n}\n",
			   j.max_rate, j.max_rate);
		if (!j.seen[1]) {
			j.seen[1] = true;
			buf_str(&j.body, "\n\002END\002\n");
		}
		buf_str(&j.merged[1], "\tclear(@__probekit_hits);\n\tdelete(@__probekit_last);\n");
	}
	buf_cat(&out, &j.defs);
	buf_str(&out, "");
	/* Put each merged BEGIN and END where its first block was. */
	for (tok = j.body.p; tok && *tok; ) {
		const char *hit = strchr(tok, '\002');

		if (!hit) {
			buf_str(&out, tok);
			break;
		}
		buf_add(&out, tok, (size_t)(hit - tok));
		key = hit[1] == 'B' ? 0 : 1;
		if (key == 0) {
			buf_cat(&out, &begin);
		} else {
			buf_str(&out, "END\n{\n");
			buf_cat(&out, &j.merged[1]);
			buf_str(&out, "}");
		}
		tok = strchr(hit + 1, '\002') + 1;
	}
	put_pids(&pids, &out, j.pid);
	if (exe[0]) {
		print_link(exe);
		putchar('\002');
	}
	if (j.refs.len)
		fwrite(j.refs.p, 1, j.refs.len, stdout);
	putchar('\002');
	if (exe[0] && j.refs.len) {
		w = wants_from_refs(&j.refs, &nw);
		find_in_files(w, nw, &exe, 1);
	}
	putchar('\002');
	emit(&pids);
	free(text.p);
	free(begin.p);
	free(out.p);
	free(pids.p);
	free(j.defs.p);
	free(j.body.p);
	free(j.merged[0].p);
	free(j.merged[1].p);
	free(j.refs.p);
	return fflush(stdout) ? 1 : 0;
}

/* --- what an ELF file has -------------------------------------------------------- */

struct want {
	long id;
	bool usdt;	/* else a symbol */
	char *spec;
	bool found;
};

/* bpftrace's wildcards: * and ?. */
static bool glob(const char *g, const char *s)
{
	const char *star = NULL, *back = NULL;

	while (*s) {
		if (*g == '*') {
			star = g++;
			back = s;
		} else if (*g == '?' || *g == *s) {
			g++;
			s++;
		} else if (star) {
			g = star + 1;
			s = ++back;
		} else {
			return false;
		}
	}
	while (*g == '*')
		g++;
	return !*g;
}

static bool usdt_matches(const struct want *w, const struct usdt_note *note)
{
	char full[2 * USDT_NAME_MAX];

	if (!strchr(w->spec, ':'))	/* no provider: any provider */
		return glob(w->spec, note->name);
	snprintf(full, sizeof(full), "%s:%s", note->provider, note->name);
	return glob(w->spec, full);
}

/* Whether symbol sym of elf counts as a function, as nm --defined-only
 * would show it with type T, t, W, i or u: functions and anything else
 * that lives in a code section. */
static bool code_symbol(Elf *elf, const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info), bind = GELF_ST_BIND(sym->st_info);
	GElf_Shdr sh;
	Elf_Scn *scn;

	if (sym->st_shndx == SHN_UNDEF || sym->st_shndx == SHN_COMMON ||
	    type == STT_SECTION || type == STT_FILE)
		return false;
	if (type == STT_GNU_IFUNC || bind == STB_GNU_UNIQUE)
		return true;
	if (bind == STB_WEAK)
		return type != STT_OBJECT && type != STT_COMMON;
	if ((bind != STB_GLOBAL && bind != STB_LOCAL) || sym->st_shndx == SHN_ABS ||
	    sym->st_shndx >= SHN_LORESERVE)
		return false;
	scn = elf_getscn(elf, sym->st_shndx);
	return scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
}

/* Mark the symbol wants that elf's symbol tables satisfy; the count. */
static int match_symbols(Elf *elf, struct want *w, int nw)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Sym sym;
	Elf_Data *data;
	size_t i, count, len;
	const char *name, *at;
	char plain[1024];
	int k, hits = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			die("corrupt symbol table (%s)", elf_errmsg(-1));
		count = data->d_size / sh.sh_entsize;
		for (i = 0; i < count; i++) {
			if (!gelf_getsym(data, (int)i, &sym) || !code_symbol(elf, &sym))
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			at = strchr(name, '@');
			len = at ? (size_t)(at - name) : strlen(name);
			if (!len || len >= sizeof(plain))
				continue;
			memcpy(plain, name, len);
			plain[len] = '\0';
			for (k = 0; k < nw; k++) {
				if (w[k].found || w[k].usdt || !glob(w[k].spec, plain))
					continue;
				w[k].found = true;
				hits++;
			}
		}
	}
	return hits;
}

/* Read the want-list from stdin. */
static int read_wants(struct want **out)
{
	struct want *w = NULL;
	char line[SPEC_LEN_MAX + 64], *tab, *kind, *end;
	int n = 0;

	while (fgets(line, sizeof(line), stdin)) {
		if (!strchr(line, '\n') && !feof(stdin))
			die("a want-list line is longer than %zu bytes", sizeof(line) - 1);
		line[strcspn(line, "\n")] = '\0';
		if (!*line)
			continue;
		if (n == WANT_MAX)
			die("more than %d probe references", WANT_MAX);
		w = realloc(w, (size_t)(n + 1) * sizeof(*w));
		if (!w)
			die("out of memory");
		errno = 0;
		w[n].id = strtol(line, &end, 10);
		kind = end + 1;
		tab = *end == '\t' ? strchr(kind, '\t') : NULL;
		if (!tab || errno || w[n].id <= 0)
			die("want-list line '%.60s' is not N<TAB>usdt|syms<TAB>SPEC", line);
		*tab = '\0';
		w[n].usdt = !strcmp(kind, "usdt");
		w[n].spec = strdup(tab + 1);
		w[n].found = false;
		if (!w[n].spec)
			die("out of memory");
		n++;
	}
	*out = w;
	return n;
}

/* The ELF file at path, or NULL when it cannot be opened (it went away)
 * or is not ELF; one that is ELF but truncated or corrupt is an error, as
 * is one that is not a regular file (a FIFO would block the read). */
static Elf *open_elf(const char *path, int *fd, unsigned long long *size)
{
	struct stat st;
	char err[256];
	Elf *elf;

	*fd = usdt_open_regular(path, err, sizeof(err));
	if (*fd == USDT_NOT_REGULAR)
		die("%s: %s", path, err);
	if (*fd < 0)
		return NULL;
	elf = fstat(*fd, &st) ? NULL : elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	*size = (unsigned long long)st.st_size;
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		close(*fd);
		return NULL;
	}
	if (usdt_elf_check(elf, (unsigned long long)st.st_size, err, sizeof(err)))
		die("%s: %s", path, err);
	return elf;
}

/* A file that is not ELF (or cannot be opened: it went away) has nothing;
 * an ELF file whose notes are corrupt is an error worth a line. */
/* Print "N I" for each want that files[I] has, the first I that has it;
 * stop reading files once every want is found.  Frees the wants. */
static void find_in_files(struct want *w, int nw, char **files, int nfiles)
{
	struct usdt_note *notes;
	size_t nn, i;
	int left = nw, f, k, fd;
	unsigned long long size;
	bool any_usdt = false, any_syms = false;
	char err[512];
	Elf *elf;

	for (k = 0; k < nw; k++) {
		any_usdt |= w[k].usdt;
		any_syms |= !w[k].usdt;
	}
	for (f = 0; f < nfiles && left > 0; f++) {
		elf = open_elf(files[f], &fd, &size);
		if (!elf)
			continue;
		if (any_syms)
			left -= match_symbols(elf, w, nw);
		if (any_usdt) {
			if (usdt_notes_read_elf(elf, size, &notes, &nn, err, sizeof(err)))
				die("%s: %s", files[f], err);
			for (k = 0; k < nw; k++) {
				for (i = 0; i < nn && !w[k].found && w[k].usdt; i++) {
					if (usdt_matches(&w[k], &notes[i])) {
						w[k].found = true;
						left--;
					}
				}
			}
			usdt_notes_free(notes);
		}
		elf_end(elf);
		close(fd);
		for (k = 0; k < nw; k++) {
			if (w[k].found && w[k].spec) {
				printf("%ld %d\n", w[k].id, f);
				free(w[k].spec);
				w[k].spec = NULL;
			}
		}
	}
	for (k = 0; k < nw; k++)
		free(w[k].spec);
	free(w);
}

static int j_nrefs_max(const struct buf *refs)
{
	const char *p = refs->p;
	int n = 0;

	while (p && (p = strchr(p, '\n'))) {
		n++;
		p++;
	}
	return n;
}

/* The wants of the references "N<TAB>KIND<TAB>SPEC\n"... that join found:
 * usdt and U name probes, the others symbols; an address
 * (uprobe:__EXE__:0x...) needs no lookup. */
static struct want *wants_from_refs(const struct buf *refs, int *nw)
{
	struct want *w = calloc((size_t)j_nrefs_max(refs) + 1, sizeof(*w));
	const char *p = refs->p, *nl, *kind, *spec;
	int n = 0;

	if (!w)
		die("out of memory");
	for (; p && *p; p = nl + 1) {
		nl = strchr(p, '\n');
		kind = strchr(p, '\t') + 1;
		spec = strchr(kind, '\t') + 1;
		w[n].id = strtol(p, NULL, 10);
		w[n].usdt = !strncmp(kind, "usdt\t", 5) || !strncmp(kind, "U\t", 2);
		if (!w[n].usdt && *spec >= '0' && *spec <= '9')
			continue;
		w[n].spec = strndup(spec, (size_t)(nl - spec));
		if (!w[n].spec)
			die("out of memory");
		n++;
	}
	*nw = n;
	return w;
}

static int cmd_has(int argc, char **argv)
{
	struct want *w;
	int nw = read_wants(&w);

	find_in_files(w, nw, argv, argc);
	return fflush(stdout) ? 1 : 0;
}

/* The edit distance (insert, delete, replace) between a and b, b at most
 * SPEC_LEN_MAX bytes. */
static size_t distance(const char *a, const char *b)
{
	size_t row[SPEC_LEN_MAX + 1], nb = strlen(b), i, k, diag, up;

	for (k = 0; k <= nb; k++)
		row[k] = k;
	for (i = 1; a[i - 1]; i++) {
		diag = row[0];
		row[0] = i;
		for (k = 1; k <= nb; k++) {
			up = row[k];
			row[k] = diag + (a[i - 1] != b[k - 1]);
			if (up + 1 < row[k])
				row[k] = up + 1;
			if (row[k - 1] + 1 < row[k])
				row[k] = row[k - 1] + 1;
			diag = up;
		}
	}
	return row[nb];
}

/* The probe of FILE... nearest to the usdt SPEC that none of them has, by
 * edit distance ("provider:name" against a spec with a provider, else the
 * name): "I<TAB>PROVIDER:NAME" with I its file's index, the first of
 * equals.  Nothing when none is within a third of SPEC's length: that is
 * not a misspelling but a script for another program. */
static int cmd_nearest(int argc, char **argv)
{
	struct usdt_note *notes;
	size_t nn, i, d, best = (size_t)-1;
	unsigned long long size;
	char full[2 * USDT_NAME_MAX + 1], err[512], found[sizeof(full)] = "";
	const char *spec;
	int f, fd, at = -1;
	bool by_name;
	Elf *elf;

	if (argc < 2)
		die("probekit-scan nearest SPEC FILE...");
	spec = argv[0];
	if (strlen(spec) > SPEC_LEN_MAX)
		die("a probe name of more than %d bytes", SPEC_LEN_MAX);
	by_name = !strchr(spec, ':');
	for (f = 1; f < argc; f++) {
		elf = open_elf(argv[f], &fd, &size);
		if (!elf)
			continue;
		if (usdt_notes_read_elf(elf, size, &notes, &nn, err, sizeof(err)))
			die("%s: %s", argv[f], err);
		for (i = 0; i < nn; i++) {
			snprintf(full, sizeof(full), "%s:%s", notes[i].provider, notes[i].name);
			d = distance(by_name ? notes[i].name : full, spec);
			if (d < best) {
				best = d;
				at = f - 1;
				memcpy(found, full, sizeof(full));
			}
		}
		usdt_notes_free(notes);
		elf_end(elf);
		close(fd);
	}
	if (at >= 0 && best * 3 <= strlen(spec))
		printf("%d\t%s\n", at, found);
	return fflush(stdout) ? 1 : 0;
}

static int cmd_build_id(const char *path)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Nhdr nh;
	Elf_Data *data;
	size_t off, next, name_off, desc_off, i;
	int fd;
	unsigned long long size;
	Elf *elf = open_elf(path, &fd, &size);

	print_link(path);
	putchar('\002');
	if (!elf)
		goto done;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		for (off = 0; off < data->d_size &&
		     (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0; off = next) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((char *)data->d_buf + name_off, "GNU", 4))
				continue;
			for (i = 0; i < nh.n_descsz; i++)
				printf("%02x", ((unsigned char *)data->d_buf)[desc_off + i]);
			putchar('\n');
			goto out;
		}
	}
out:
	elf_end(elf);
	close(fd);
done:
	return fflush(stdout) ? 1 : 0;
}

static int cmd_notes(const char *path)
{
	struct usdt_note *notes;
	size_t n, i;
	char err[512];

	if (usdt_notes_read(path, &notes, &n, err, sizeof(err)))
		die("%s", err);
	for (i = 0; i < n; i++)
		printf("%s\t%s\t%llx\t%llx\t%llx\t%llx\t%s\n", notes[i].provider,
		       notes[i].name, notes[i].pc, notes[i].pc_off, notes[i].sema,
		       notes[i].sema_off, notes[i].spec);
	usdt_notes_free(notes);
	return fflush(stdout) ? 1 : 0;
}

static int cmd_args(int argc, char **argv)
{
	static const char *const kinds[] = {"const", "reg", "mem", "sym", "index", "unknown"};
	struct usdt_arg args[USDT_ARGC_MAX];
	char err[256];
	int n, i, machine = EM_X86_64;

	if (argc == 3 && !strcmp(argv[0], "--machine") && !strcmp(argv[1], "aarch64"))
		machine = EM_AARCH64;
	else if (argc != 1 && !(argc == 3 && !strcmp(argv[0], "--machine") &&
				!strcmp(argv[1], "x86_64")))
		die("usage: probekit-scan args [--machine aarch64|x86_64] SPEC");
	n = usdt_args_parse(argv[argc - 1], machine, args, USDT_ARGC_MAX, err, sizeof(err));
	if (n < 0)
		die("%s", err);
	for (i = 0; i < n; i++)
		printf("%s\t%d\t%d\t%lld\t%s\t%d\t%d\t%s\t%d\n", kinds[args[i].kind],
		       args[i].size, args[i].is_signed, args[i].val, args[i].reg,
		       usdt_arg_readable_bpftrace(&args[i]), usdt_arg_readable_libbpf(&args[i]),
		       args[i].index, args[i].scale);
	return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		die("libelf is too old (%s)", elf_errmsg(-1));
	if (argc >= 2 && !strcmp(argv[1], "join"))
		return cmd_join(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "has"))
		return cmd_has(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "nearest"))
		return cmd_nearest(argc - 2, argv + 2);
	if (argc == 3 && !strcmp(argv[1], "build-id"))
		return cmd_build_id(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "notes"))
		return cmd_notes(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "args"))
		return cmd_args(argc - 2, argv + 2);
	die("probekit-scan is probekit-bpftrace's helper; usage: probekit-scan join|has|nearest|build-id|notes|args ...");
}
