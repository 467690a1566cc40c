// SPDX-License-Identifier: BSD-2-Clause
/* The script joiner of probekit-bpftrace (wrapper/bpftrace.sh): its
 * scripts made into the one program bpftrace runs, and the join command of
 * its helper probekit-scan, which hands that program to the wrapper.
 *
 * One pass over each script's text that knows strings and comments finds
 * the top-level blocks, merges the BEGIN and the END bodies in script order
 * (bpftrace accepts one of each), hoists C definitions (#-lines, struct,
 * union, enum) to the top, notes each KIND:__EXE__:SPEC of an attach point
 * as a reference for the wrapper to resolve to a file, and replaces
 * __PID__ with the PID (before any path is inserted, so never in a path).
 * The readiness line ends BEGIN; -d adds a timer that calls exit(), and
 * --max-rate a per-CPU hit count on every usdt/uprobe/uretprobe block and
 * a once-a-second check of their sum.
 *
 * One window.  bpftrace attaches its probes one at a time after BEGIN has
 * run, and detaches them one at a time when the trace ends, 100 ms and
 * more apart at full rate, so each probe would count over a window of its
 * own: a count of io__submit beside one of io__done ended 50,000 to 80,000
 * apart.  So every block that traces (any probe but BEGIN, END and
 * interval) runs its body only while @__pk_gate is 1, and the gate is
 * moved by the wrapper's own probes on bpftrace itself (gate_pid):
 *   0 -> 1  at bpftrace's first epoll_wait (gate_open's syscalls), the
 *           first thing bpftrace 0.17, 0.23 and 0.27 do once every probe
 *           is attached (BEGIN runs before any is; so does the readiness
 *           line's printf, whose output bpftrace reads in that very call);
 *   1 -> 2  at a signal delivered to bpftrace (Ctrl-C, SIGTERM: the
 *           tracepoint fires before its handler runs, so before any
 *           detach), and just before every exit() of the program: the
 *           scripts' own, -d's and --max-rate's.
 * It never opens again.  A trace of a PID that exits ends with it, every
 * probe at once.  --hits adds, for each distinct attach point of a
 * traced block, a block of its own that counts its hits in the window
 * (per CPU, so that no two CPUs race on one counter), and END prints
 * them: "probekit: hits NAME N" a line, or one map under -f json.
 *
 * The line map lets bpftrace's "stdin:LINE:..." errors name the script's
 * FILE:LINE.  While joining, each piece carries a mark \003F:L\003 at each
 * of its line starts (F: the script's index from 1, L: its line); a piece
 * moved out of its line (a BEGIN or END body, a struct) starts on a line of
 * its own, indented so that bpftrace's columns stay the script's.  A
 * reference is marked \001N\001 in place of its __EXE__, and a merged
 * BEGIN or END \002KEY\002 where its first block was.  These marks never
 * leave this file (a script holding such a byte is refused): at the end
 * they are taken out, each run of program lines that follow one script's
 * lines in order becomes one span of the map, and each reference its
 * __EXE__'s offset.
 *
 * The join command
 *
 *   probekit-scan join PID READY DURATION EXE SCRIPT...
 *
 * PID is the traced process, or "" for a file (every process that runs
 * it): READY is then the whole readiness line, not a format, and a
 * script's __PID__ is an error.  DURATION is -d's seconds or "".  The
 * environment gives --max-rate: PROBEKIT_MAX_RATE, its budget, and
 * PROBEKIT_MAX_CPU, the highest possible CPU (so the operands stay the
 * same with or without it).  EXE is /proc/PID/exe or the traced file, read
 * in the same run so that a trace whose executable has every probe needs
 * no second one; "" reads none.
 *
 * It prints lines, each a word that says what it is and its fields after
 * single spaces, in this order:
 *
 *   exe LEN:TARGET     the target of the link EXE (EXE itself when it is a
 *                      file): LEN bytes that may hold any byte but NUL, a
 *                      newline too; "exe -" when it cannot be read.  None
 *                      when EXE is "".
 *   ref N AT KIND SPEC reference N (from 1, in program order): the attach
 *                      point KIND:__EXE__:SPEC, whose __EXE__ is at byte
 *                      offset AT of the program.  SPEC holds no blank.
 *   has N              EXE has reference N's USDT probe (usdt, U) or
 *                      function symbol (the other kinds); an address
 *                      (uprobe:__EXE__:0x...) needs none and has no line.
 *   map AT F L         program lines from AT on (the first is 1) are lines
 *                      of the F-th SCRIPT from its line L on, up to the next
 *                      map line; F 0 for lines the joiner wrote.  The last
 *                      is "map N 0 0", N one past the program's last line.
 *   program            the last line: the program follows, to the end.
 *
 * The wrapper puts the quoted path of each reference's file in place of
 * its __EXE__ (by offset, so that no text of a script can pose as one).
 * Every failure is one line on stderr, as the wrapper's own, and exit 1. */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "argnames.h"
#include "join.h"
#include "look.h"
#include "usdt_notes.h"

/* The largest script read: more is no bpftrace script. */
#define SCRIPT_MAX (4u << 20)

struct joiner {
	const struct join_opts *o;
	struct helper_buf defs, body, merged[2];
	bool seen[2];
	struct join_ref *refs;
	int nrefs;
	/* The script being read. */
	const char *s, *path;
	size_t n;
	int fidx;
	char name[64];
	size_t lp;	/* line_at's last position, and its line */
	long ll;
	/* --hits: the distinct attach points of traced blocks, as written
	 * (blanks trimmed), and the name each is printed under. */
	char **hit_ap, **hit_name;
	int nhits;
	int ntraced;	/* traced blocks: those the window holds */
};

/* What a traced block's body runs under, and what closes the window. */
#define GATE_OPEN_TEST "if (@__pk_gate == 1) {"
#define GATE_CLOSE "@__pk_gate = 2; " 

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

static void add_mark(struct joiner *j, struct helper_buf *out, long line)
{
	helper_buf_printf(out, "\003%d:%ld\003", j->fidx, line);
}

/* s[a, b) onto out, with a line mark at each line start in it. */
static void copy(struct joiner *j, struct helper_buf *out, size_t a, size_t b)
{
	const char *s = j->s, *nl;
	long l;

	if (b <= a)
		return;
	l = line_at(j, a);
	if (a == 0 || s[a - 1] == '\n')
		add_mark(j, out, l);
	while ((nl = memchr(s + a, '\n', b - a)) && (size_t)(nl - s) + 1 < b) {
		helper_buf_add(out, s + a, (size_t)(nl - s) + 1 - a);
		add_mark(j, out, ++l);
		a = (size_t)(nl - s) + 1;
	}
	helper_buf_add(out, s + a, b - a);
}

/* What starts a piece moved from p onto a line of its own: the mark of
 * p's line, and blanks as wide as the text before p (tabs kept). */
static void at(struct joiner *j, struct helper_buf *out, size_t p)
{
	size_t b = p;

	if (p == 0 || j->s[p - 1] == '\n')
		return;
	while (b > 0 && j->s[b - 1] != '\n')
		b--;
	add_mark(j, out, line_at(j, p));
	for (; b < p; b++)
		helper_buf_add(out, j->s[b] == '\t' ? "\t" : " ", 1);
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
static void mark_header(struct joiner *j, struct helper_buf *out, size_t a, size_t b, int reads)
{
	struct helper_buf h = {0};
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
			helper_die("attach point %s:__EXE__ names no probe or function", kind);
		if (len > LOOK_SPEC_MAX)
			helper_die("attach point %s:__EXE__:%.40s... is longer than %d bytes",
			    kind, h.p + e + 1, LOOK_SPEC_MAX);
		j->refs = realloc(j->refs, (size_t)(j->nrefs + 1) * sizeof(*j->refs));
		if (!j->refs)
			helper_die("out of memory");
		j->refs[j->nrefs].kind = kind;
		j->refs[j->nrefs].reads = reads;
		j->refs[j->nrefs].spec = strndup(h.p + e + 1, len);
		if (!j->refs[j->nrefs].spec)
			helper_die("out of memory");
		j->nrefs++;
		helper_buf_add(out, h.p + from, i - from);
		helper_buf_printf(out, "%s:\001%d\001", kind, j->nrefs);
		i = from = e;
	}
	helper_buf_add(out, h.p + from, h.len - from);
	free(h.p);
}


/* The highest N of an argN the block body s[a, b) reads (outside strings
 * and comments), or -1: the wrapper checks it against the probe's
 * arguments, which bpftrace 0.27 does not (it reads past them). */
static int highest_arg(const char *s, size_t a, size_t b)
{
	int best = -1, v;
	size_t i = a, d;

	while (i < b) {
		if (s[i] == '"' || is_comment(s, i, b)) {
			i = skip(s, i, b);
			continue;
		}
		if (i + 3 < b && !strncmp(s + i, "arg", 3) && isdigit((unsigned char)s[i + 3]) &&
		    (i == a || !(isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_' || s[i - 1] == '$' || s[i - 1] == '@'))) {
			for (v = 0, d = i + 3; d < b && isdigit((unsigned char)s[d]) && v < 1000; d++)
				v = v * 10 + (s[d] - '0');
			if (d >= b || !(isalnum((unsigned char)s[d]) || s[d] == '_'))
				best = v > best ? v : best;
			i = d;
			continue;
		}
		i++;
	}
	return best;
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

/* Text put before s[pos] on out: after the mark of pos's line when pos
 * starts one (emit() reads a line's mark only at its start).  Returns
 * where the copy of s goes on from. */
static size_t put_before(struct joiner *j, struct helper_buf *out, size_t pos, const char *text)
{
	if (pos == 0 || j->s[pos - 1] == '\n') {
		add_mark(j, out, line_at(j, pos));
		helper_buf_str(out, text);
		helper_buf_add(out, j->s + pos, 1);
		return pos + 1;
	}
	helper_buf_str(out, text);
	return pos;
}

/* Whether s[i] starts a call of exit() (the caller skips strings and
 * comments). */
static bool is_exit_at(const char *s, size_t i, size_t n)
{
	size_t k = i + 4;

	if (k > n || strncmp(s + i, "exit", 4))
		return false;
	if (i > 0 && (is_ident(s[i - 1]) || strchr("$@.", s[i - 1])))
		return false;
	while (k < n && (s[k] == ' ' || s[k] == '\t'))
		k++;
	return k < n && s[k] == '(';
}

/* Whether the args token at s[i] is str()'s argument: "str(" before it,
 * blanks between. */
static bool in_str(const char *s, size_t a, size_t i)
{
	while (i > a && strchr(" \t", s[i - 1]))
		i--;
	if (i <= a || s[i - 1] != '(')
		return false;
	i--;
	while (i > a && strchr(" \t", s[i - 1]))
		i--;
	return i >= a + 3 && !strncmp(s + i - 3, "str", 3) && (i == a + 3 || !is_ident(s[i - 4]));
}

/* s[a, b) of a block's predicate or body onto out as copy() does, with
 * the window closed just before each exit() (bpftrace detaches after
 * exit() as it does after Ctrl-C, one probe at a time), and, for a usdt
 * probe's block (pa), each args.NAME read as the argument of that name
 * (argnames.c; where names the block in a message).  *reads becomes the
 * highest argument so read. */
static void copy_named(struct joiner *j, struct helper_buf *out, size_t a, size_t b,
		       const struct usdt_probe_args *pa, const char *where, int *reads)
{
	const char *s = j->s;
	size_t i = a, from = a, tok, name, len;
	int n;

	while (i < b) {
		if (s[i] == '"' || is_comment(s, i, b)) {
			i = skip(s, i, b);
			continue;
		}
		if (pa && (tok = argnames_at(s, i, b, &name, &len))) {
			copy(j, out, from, i);
			if (i == 0 || s[i - 1] == '\n')
				add_mark(j, out, line_at(j, i));
			n = argnames_put(out, pa, s + name, len, in_str(s, a, i), where);
			if (reads && n > *reads)
				*reads = n;
			i = from = i + tok;
			continue;
		}
		if (!is_exit_at(s, i, b)) {
			i++;
			continue;
		}
		copy(j, out, from, i);
		from = put_before(j, out, i, GATE_CLOSE);
		i += 4;
	}
	copy(j, out, from, b);
}

static void copy_code(struct joiner *j, struct helper_buf *out, size_t a, size_t b)
{
	copy_named(j, out, a, b, NULL, NULL, NULL);
}

/* s[i..] past blanks and comments, up to b. */
static size_t skip_blank(const char *s, size_t i, size_t b)
{
	while (i < b) {
		if (strchr(" \t\r\n", s[i]))
			i++;
		else if (is_comment(s, i, b))
			i = skip(s, i, b);
		else
			break;
	}
	return i;
}

/* Whether the block header s[a, b) traces, so that its body runs only
 * inside the window: every probe but interval (BEGIN and END are merged
 * apart), iter (run once, without the polling that opens the window) and
 * self (bpftrace's own signal probe). */
static bool is_traced(const char *s, size_t a, size_t b)
{
	static const char *const untraced[] = {"interval:", "i:", "iter:", "it:", "self:"};
	size_t k;

	a = skip_blank(s, a, b);
	for (k = 0; k < sizeof(untraced) / sizeof(untraced[0]); k++)
		if (b - a > strlen(untraced[k]) && !strncmp(s + a, untraced[k], strlen(untraced[k])))
			return false;
	return true;
}

/* The name --hits prints for the attach point ap: a USDT probe's
 * PROVIDER:NAME (or NAME), a tracepoint's CATEGORY:NAME, and the rest as
 * KIND:WHAT, without the path of the file; only characters that need no
 * quoting in a bpftrace string or format. */
static char *hit_name(const char *ap)
{
	static const char *const pathed[][2] = {
		{"usdt", ""}, {"U", ""}, {"uprobe", "uprobe:"}, {"u", "uprobe:"},
		{"uretprobe", "uretprobe:"}, {"ur", "uretprobe:"},
		{"tracepoint", ""}, {"t", ""},
	};
	struct helper_buf b = {0};
	const char *c = strchr(ap, ':'), *rest;
	size_t k, kl = c ? (size_t)(c - ap) : 0, i;

	if (!c)
		c = ap - 1;
	rest = c + 1;
	for (k = 0; k < sizeof(pathed) / sizeof(pathed[0]); k++) {
		if (strlen(pathed[k][0]) != kl || strncmp(ap, pathed[k][0], kl))
			continue;
		if (k < 6) {	/* a file's path, up to the next ':' */
			if (*rest == '"')
				rest = strchr(rest + 1, '"') ? strchr(rest + 1, '"') + 1 : rest + strlen(rest);
			rest = strchr(rest, ':') ? strchr(rest, ':') + 1 : rest + strlen(rest);
		}
		helper_buf_str(&b, pathed[k][1]);
		break;
	}
	if (k == sizeof(pathed) / sizeof(pathed[0]))
		rest = ap;
	helper_buf_str(&b, rest);
	for (i = 0; i < b.len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.*?+-", b.p[i]))
			b.p[i] = '?';
	if (b.len > 128)
		b.p[128] = '\0';
	return b.p ? b.p : strdup("?");
}

/* The test a traced block's body runs under: the window, and, when
 * bpftrace runs without -p (only_pid), the traced PID for the probes of
 * a file (usdt, uprobe, uretprobe), which then fire in every process
 * that maps it. */
static void gate_test(struct joiner *j, struct helper_buf *out, bool of_file)
{
	if (of_file && j->o->only_pid[0])
		helper_buf_printf(out, "if (pid == %s && @__pk_gate == 1) {", j->o->only_pid);
	else
		helper_buf_str(out, GATE_OPEN_TEST);
}

/* The most attach points one block header may list. */
#define APS_MAX 256

/* The attach points of the block header s[a, b), as [x, y) spans (blanks
 * trimmed) into aps, at most APS_MAX; *pred is where its predicate starts
 * (the '/' after a blank) or b.  Returns how many. */
static int split_header(const char *s, size_t a, size_t b, size_t (*aps)[2], size_t *pred)
{
	size_t e, p, q, x, y;
	int n = 0;

	for (e = a; e < b; ) {	/* the predicate's '/' follows a blank */
		if (s[e] == '"' || is_comment(s, e, b)) {
			e = skip(s, e, b);
			continue;
		}
		if (s[e] == '/' && e > a && strchr(" \t\r\n", s[e - 1]))
			break;
		e++;
	}
	*pred = e;
	for (p = a; p < e; p = q + 1) {
		for (q = p; q < e && s[q] != ','; )
			q = s[q] == '"' || is_comment(s, q, e) ? skip(s, q, e) : q + 1;
		x = skip_blank(s, p, q);
		for (y = q; y > x && strchr(" \t\r\n", s[y - 1]); y--)
			;
		if (x == y)
			continue;
		if (n == APS_MAX)
			helper_die("a block lists more than %d attach points", APS_MAX);
		aps[n][0] = x;
		aps[n][1] = y;
		n++;
	}
	return n;
}

/* --hits: for each attach point of the traced block header s[a, b) (the
 * list before its predicate) that no block before named, a block of its
 * own onto out that counts its hits inside the window, under its own
 * index and the CPU's (no two CPUs race on one counter).  A probe that
 * several blocks name is counted once a hit. */
static void add_hit_blocks(struct joiner *j, struct helper_buf *out, size_t a, size_t b)
{
	const char *s = j->s;
	size_t aps[APS_MAX][2], pred, x, y;
	char *ap;
	int i, k, n = split_header(s, a, b, aps, &pred);

	for (k = 0; k < n; k++) {
		x = aps[k][0];
		y = aps[k][1];
		ap = strndup(s + x, y - x);
		if (!ap)
			helper_die("out of memory");
		for (i = 0; i < j->nhits && strcmp(j->hit_ap[i], ap); i++)
			;
		if (i < j->nhits) {
			free(ap);
			continue;
		}
		j->hit_ap = realloc(j->hit_ap, (size_t)(j->nhits + 1) * sizeof(*j->hit_ap));
		j->hit_name = realloc(j->hit_name, (size_t)(j->nhits + 1) * sizeof(*j->hit_name));
		if (!j->hit_ap || !j->hit_name)
			helper_die("out of memory");
		j->hit_ap[j->nhits] = ap;
		j->hit_name[j->nhits] = hit_name(ap);
		helper_buf_str(out, "\n");
		mark_header(j, out, x, y, -1);
		helper_buf_str(out, "\n{\n\t");
		gate_test(j, out, counts_hits(s, x, y));
		helper_buf_printf(out, " @__pk_hits[%d, cpu]++; }\n}\n", j->nhits);
		j->nhits++;
	}
}

/* The file and the probe a usdt attach point s[x, y) names, "usdt:FILE:
 * SPEC" or "U:FILE:SPEC", FILE __EXE__ (the traced file) or a path; the
 * probe's argument names from it (argnames_probe: one line and exit 1 if
 * there are none). */
static const struct usdt_probe_args *named_probe(struct joiner *j, size_t x, size_t y,
						 const char *where)
{
	char *ap = strndup(j->s + x, y - x), *file, *spec, *q;
	const struct usdt_probe_args *pa;

	if (!ap)
		helper_die("out of memory");
	file = strchr(ap, ':');
	if (!file || !(strncmp(ap, "usdt:", 5) == 0 || strncmp(ap, "U:", 2) == 0))
		helper_die("%s: args.NAME names a usdt probe's arguments, and %s is not one", where, ap);
	file++;
	if (*file == '"') {
		q = strchr(file + 1, '"');
		if (!q)
			helper_die("%s: %s: an unclosed quote", where, ap);
		*q = '\0';
		file++;
		spec = q + 1;
	} else {
		spec = strchr(file, ':');
		if (!spec)
			helper_die("%s: %s names no probe", where, ap);
		*spec++ = '\0';
		spec--;
	}
	if (*spec == ':' || *spec == '\0')
		spec++;
	if (!strcmp(file, "__EXE__")) {
		if (!j->o->exe[0])
			helper_die("%s: args.NAME needs the traced file, which the wrapper gives", where);
		file = (char *)j->o->exe;
	}
	pa = argnames_probe(file, spec, where);
	free(ap);
	return pa;
}

/* What a block's body starts with, after its '{': the window's test when
 * the block is traced, and --max-rate's count when it attaches a probe of
 * a file (of_file), as the usdt blocks that read args.NAME all do. */
static void body_opening(struct joiner *j, bool traced, bool of_file)
{
	if (traced) {
		helper_buf_str(&j->body, " ");
		gate_test(j, &j->body, of_file);
	}
	if (j->o->max_rate[0] && of_file)
		helper_buf_str(&j->body, " @__probekit_hits[cpu]++;");
}

/* A usdt block s[start, k] whose predicate or body names its arguments
 * (args.NAME): one block per attach point, each reading the names of its
 * own probe (io__submit's len is its fifth argument, io__done's its
 * fourth), with the window's test and --hits' block as any traced block. */
static void join_named(struct joiner *j, size_t start, size_t hb, size_t k, bool traced)
{
	const char *s = j->s;
	size_t aps[APS_MAX][2], pred, from;
	const struct usdt_probe_args *pa;
	struct helper_buf scratch = {0};
	char where[PATH_MAX + 32];
	int n = split_header(s, start, hb, aps, &pred), i, reads;

	snprintf(where, sizeof(where), "%s:%ld", j->path, line_at(j, start));
	for (i = 0; i < n; i++) {
		pa = named_probe(j, aps[i][0], aps[i][1], where);
		/* The highest argument read, for the wrapper's check against
		 * the probe's notes: argN written, and the names' indexes. */
		reads = highest_arg(s, pred, k);
		scratch.len = 0;
		copy_named(j, &scratch, pred, k, pa, where, &reads);
		helper_buf_str(&j->body, "\n");
		at(j, &j->body, aps[i][0]);
		mark_header(j, &j->body, aps[i][0], aps[i][1], reads);
		if (pred < hb) {
			helper_buf_str(&j->body, "\n");
			at(j, &j->body, pred);
			copy_named(j, &j->body, pred, hb, pa, where, NULL);
		}
		helper_buf_str(&j->body, "\n");
		at(j, &j->body, hb);
		copy(j, &j->body, hb, hb + 1);
		body_opening(j, traced, true);
		copy_named(j, &j->body, hb + 1, k, pa, where, NULL);
		from = traced ? put_before(j, &j->body, k, "}") : k;
		copy(j, &j->body, from, k + 1);
		if (traced && j->o->hits[0])
			add_hit_blocks(j, &j->body, aps[i][0], aps[i][1]);
	}
	free(scratch.p);
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

/* Whether the predicate and body s[a, b) read bpftrace's probe builtin
 * (outside strings and comments). */
static bool uses_probe(const char *s, size_t a, size_t b)
{
	size_t i = a;

	while (i < b) {
		if (s[i] == '"' || is_comment(s, i, b)) {
			i = skip(s, i, b);
			continue;
		}
		if (i + 5 <= b && !strncmp(s + i, "probe", 5) &&
		    (i == a || !(is_ident(s[i - 1]) || s[i - 1] == '$' || s[i - 1] == '@')) &&
		    (i + 5 == b || !is_ident(s[i + 5])))
			return true;
		i++;
	}
	return false;
}

/* A block onto the body: its attach points s[hx, hy), its predicate
 * s[pred, hb) (none when pred == hb; the list and the predicate are one
 * span when hy == pred), its body s[hb, k], with the window's test and
 * --hits' blocks when it is traced.  join_one() calls it once a block,
 * or once an attach point where bpftrace 0.17 cannot load --hits' block
 * beside the block: a block of several attach points that reads the
 * probe builtin is made one program per attach point, each named as the
 * attach point, and a second block of that name then fails to load
 * ("Error loading program: tracepoint:syscalls:sys_enter_read"), or
 * counts nothing.  Split, each is one block of one attach point, as a
 * script may write it. */
static void join_block(struct joiner *j, size_t hx, size_t hy, size_t pred, size_t hb,
		       size_t k, bool traced)
{
	const char *s = j->s;
	size_t from;

	if (hy != hb) {
		helper_buf_str(&j->body, "\n");
		at(j, &j->body, hx);
	}
	mark_header(j, &j->body, hx, hy, highest_arg(s, hb, k));
	if (pred < hb) {
		helper_buf_str(&j->body, "\n");
		at(j, &j->body, pred);
		copy(j, &j->body, pred, hb);
	}
	if (hy != hb) {
		helper_buf_str(&j->body, "\n");
		at(j, &j->body, hb);
	}
	copy(j, &j->body, hb, hb + 1);
	body_opening(j, traced, counts_hits(s, hx, hy));
	copy_code(j, &j->body, hb + 1, k);
	from = traced ? put_before(j, &j->body, k, "}") : k;
	copy(j, &j->body, from, k + 1);
	if (traced && j->o->hits[0])
		add_hit_blocks(j, &j->body, hx, hy);
}

static void join_one(struct joiner *j)
{
	const char *s = j->s, *e;
	size_t n = j->n, i = 0, start, k, hb;
	int depth, key;
	char hdr[64];

	if (memchr(s, '\001', n) || memchr(s, '\002', n) || memchr(s, '\003', n))
		helper_die("script %s contains control characters \\001, \\002 or \\003, which the wrapper uses as markers",
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
			helper_die("script %s: a block starting at \"%s\" has no closing brace", j->path, hdr);
		}
		header_key(s, start, hb, hdr, sizeof(hdr));
		key = !strcmp(hdr, "BEGIN") ? 0 : !strcmp(hdr, "END") ? 1 : -1;
		if (key >= 0) {
			if (!j->seen[key]) {
				j->seen[key] = true;
				helper_buf_printf(&j->body, "\002%s\002", KEYS[key]);
			}
			helper_buf_printf(&j->merged[key], "\t// from %s\n", j->name);
			at(j, &j->merged[key], hb + 1);
			copy_code(j, &j->merged[key], hb + 1, k);
			helper_buf_str(&j->merged[key], "\n");
		} else if (is_def(hdr)) {
			at(j, &j->defs, start);
			copy(j, &j->defs, start, k + 1);
			if (k + 1 < n && s[k + 1] == ';') {
				helper_buf_str(&j->defs, ";");
				k++;
			}
			helper_buf_str(&j->defs, "\n");
		} else if (argnames_used(s, start, k) && counts_hits(s, start, hb)) {
			bool traced = is_traced(s, start, hb);

			if (traced)
				j->ntraced++;
			join_named(j, start, hb, k, traced);
		} else {
			bool traced = is_traced(s, start, hb);
			size_t aps[APS_MAX][2], pred;
			int naps = split_header(s, start, hb, aps, &pred), a;

			if (traced)
				j->ntraced++;
			if (traced && j->o->hits[0] && naps > 1 && uses_probe(s, pred, k) &&
			    !memchr(s + start, '*', pred - start)) {
				for (a = 0; a < naps; a++)
					join_block(j, aps[a][0], aps[a][1], pred, hb, k, traced);
			} else {
				join_block(j, start, hb, hb, hb, k, traced);
			}
		}
		i = k + 1;
	}
}

/* The text of the script at path into *out: every line ends in a newline. */
static void read_script(const char *path, struct helper_buf *out)
{
	char chunk[65536];
	ssize_t got;
	char why[256];
	int fd = usdt_open_regular(path, why, sizeof(why));

	out->len = 0;
	if (fd < 0)
		helper_die("cannot read script '%s': %s", path, why);
	while ((got = read(fd, chunk, sizeof(chunk))) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			helper_die("cannot read script '%s': %s", path, strerror(errno));
		}
		if (out->len + (size_t)got > SCRIPT_MAX)
			helper_die("script '%s' is larger than %u bytes; is it a bpftrace script?", path, SCRIPT_MAX);
		helper_buf_add(out, chunk, (size_t)got);
	}
	close(fd);
	if (out->len && memchr(out->p, '\0', out->len))
		helper_die("script '%s' contains a NUL byte; is it a bpftrace script?", path);
	if (out->len && out->p[out->len - 1] != '\n')
		helper_buf_str(out, "\n");
}

/* Replace every __PID__ in b by the PID; with no PID, any is an error. */
static void put_pids(struct helper_buf *out, const struct helper_buf *in, const char *pid)
{
	const char *p = in->p, *end = in->p + in->len, *hit;

	while ((hit = memmem(p, (size_t)(end - p), "__PID__", 7))) {
		if (!*pid)
			helper_die("the script uses __PID__, but a PATH traces every process that runs it, so there is no one PID; give the PID instead of the path, or take __PID__ out of the script");
		helper_buf_add(out, p, (size_t)(hit - p));
		helper_buf_str(out, pid);
		p = hit + 7;
	}
	helper_buf_add(out, p, (size_t)(end - p));
}


/* Take the marks out of the joined text into r: the program, the offset of
 * each reference's __EXE__ and the line map. */
static void emit(const struct helper_buf *text, struct join_result *r)
{
	const char *p = text->p, *end = text->p + text->len, *nl, *q, *m, *e;
	long line = 0, f, l, pf = -1, pl = 0, id;
	int next = 0;

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
		for (q = p; q < nl; q = e + 1) {
			for (m = q; m < nl && *m != '\001' && *m != '\003'; m++)
				;
			helper_buf_add(&r->prog, q, (size_t)(m - q));
			if (m == nl)
				break;
			e = memchr(m + 1, *m, (size_t)(nl - m - 1));
			if (*m == '\001') {
				/* References are numbered as found, and their
				 * blocks keep their order: a marker out of
				 * that order is a broken joiner. */
				id = strtol(m + 1, NULL, 10);
				if (id != ++next)
					abort();
				r->refs[id - 1].at = r->prog.len;
				helper_buf_str(&r->prog, "__EXE__");
			}
		}
		if (f != pf || (f && l != pl + 1)) {
			r->map = realloc(r->map, (size_t)(r->nmap + 2) * sizeof(*r->map));
			if (!r->map)
				helper_die("out of memory");
			r->map[r->nmap++] = (struct join_span){.at = line, .file = (int)f, .line = l};
		}
		pf = f;
		pl = l;
		if (nl == end)
			break;
		helper_buf_str(&r->prog, "\n");
		p = nl + 1;
	}
	if (next != r->nrefs)
		abort();
	r->map = realloc(r->map, (size_t)(r->nmap + 1) * sizeof(*r->map));
	if (!r->map)
		helper_die("out of memory");
	r->map[r->nmap++] = (struct join_span){.at = line + 1};
}

/* The window's edges (join.c's header says why) and --hits' report: the
 * probes on bpftrace itself that open and close the window, and what END
 * adds after the scripts' own END. */
static void add_window(struct joiner *j, const struct join_opts *o)
{
	const char *p = o->gate_open, *e;
	struct helper_buf sum = {0};
	unsigned c;
	int i;

	while (*p) {
		e = p + strcspn(p, " ");
		if (e > p)
			helper_buf_printf(&j->body, "\ntracepoint:syscalls:%.*s /pid == %s/\n{\n"
				   "\tif (@__pk_gate == 0) {\n\t\t@__pk_gate = 1;\n"
				   "\t\t@__pk_opened = nsecs;\n\t}\n}\n",
				   (int)(e - p), p, o->gate_pid);
		p = *e ? e + 1 : e;
	}
	/* -d's seconds run from the window's opening, not from the attach of
	 * a timer of their own: bpftrace attaches that first, and on a loaded
	 * machine the other probes' attach took longer than a short -d, whose
	 * exit() then closed a window that had not yet opened.  A 10 ms tick
	 * checks the time since the opening; it comes after the openers, where
	 * bpftrace 0.17 has seen @__pk_opened assigned. */
	if (o->duration[0])
		helper_buf_printf(&j->body, "\ninterval:ms:10\n{\n"
			   "\tif (@__pk_gate == 1 && (uint64)((int64)nsecs - (int64)@__pk_opened) >= %s000000000) {\n"
			   "\t\t@__pk_gate = 2;\n\t\texit();\n\t}\n}\n", o->duration);
	/* bpftrace 0.17 notices SIGINT/SIGTERM only when the signal
	 * interrupts its epoll_wait() or when an event arrives after it; a
	 * signal that lands while it is printing (say, the readiness line) of
	 * a trace with nothing more to print is lost, and the trace runs on.
	 * The printf makes the delivery of a signal to bpftrace such an event.
	 * It does not read args->sig: reading args of a tracepoint makes
	 * bpftrace 0.17 build their struct with clang, which costs 0.7 s and
	 * more before the first probe is attached; so any signal delivered to
	 * bpftrace closes the window (SIGUSR1 too, which prints the maps). */
	helper_buf_printf(&j->body, "\ntracepoint:signal:signal_deliver /pid == %s/\n{\n"
		   "\tif (@__pk_gate == 1) {\n\t\t@__pk_gate = 2;\n\t}\n\tprintf(\"\");\n}\n",
		   o->gate_pid);
	if (!j->seen[1]) {
		j->seen[1] = true;
		helper_buf_str(&j->body, "\n\002END\002\n");
	}
	for (i = 0; i < j->nhits; i++) {
		sum.len = 0;
		for (c = 0; c <= o->max_cpu; c++)
			helper_buf_printf(&sum, "%s@__pk_hits[%d, %u]", c ? " + " : "", i, c);
		if (!strcmp(o->hits, "json"))
			helper_buf_printf(&j->merged[1], "\t@probekit_hits[\"%s\"] = %s;\n", j->hit_name[i], sum.p);
		else
			helper_buf_printf(&j->merged[1], "\tprintf(\"probekit: hits %s %%d\\n\", %s);\n",
				   j->hit_name[i], sum.p);
	}
	if (j->nhits && !strcmp(o->hits, "json"))
		helper_buf_str(&j->merged[1], "\tprint(@probekit_hits);\n\tclear(@probekit_hits);\n");
	if (j->nhits)
		helper_buf_str(&j->merged[1], "\tclear(@__pk_hits);\n");
	/* A window that never opened (the trace ended before every probe
	 * was attached, or bpftrace never polled) counted nothing: said, not
	 * left as zeros that look like an idle process. */
	if (j->ntraced)
		helper_buf_str(&j->merged[1], "\tif (@__pk_opened == 0) {\n\t\tprintf(\"probekit-bpftrace: "
			       "the trace ended before its window opened (before bpftrace had attached every "
			       "probe): nothing was counted\\n\");\n\t}\n");
	helper_buf_str(&j->merged[1], "\tclear(@__pk_gate);\n\tclear(@__pk_opened);\n");
	free(sum.p);
}

void join_scripts(const struct join_opts *o, char *const *paths, int n, struct join_result *r)
{
	struct joiner j = {.o = o};
	struct helper_buf text = {0}, begin = {0}, out = {0}, pids = {0};
	const char *base, *tok;
	int i, key;
	size_t k;

	for (i = 0; i < n; i++) {
		read_script(paths[i], &text);
		if (!text.len)
			continue;
		j.s = text.p;
		j.n = text.len;
		j.path = paths[i];
		j.fidx = i + 1;
		base = strrchr(paths[i], '/');
		base = base ? base + 1 : paths[i];
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
	helper_buf_str(&begin, "BEGIN\n{\n");
	helper_buf_cat(&begin, &j.merged[0]);
	/* With no syscall to open the window on, it opens here: each probe
	 * then counts from its own attach (the wrapper says so). */
	if (!o->gate_open[0])
		helper_buf_str(&begin, "\tif (@__pk_gate == 0) {\n\t\t@__pk_gate = 1;\n"
			       "\t\t@__pk_opened = nsecs;\n\t}\n");
	/* Without a PID (a trace of every process that runs a file), READY
	 * is the whole line, %-free: it may be longer than bpftrace's 64-byte
	 * string arguments, but not than a format. */
	helper_buf_str(&begin, "\tprintf(\"");
	helper_buf_str(&begin, o->ready);
	helper_buf_str(&begin, o->pid[0] ? "\\n\", __PID__);\n}" : "\\n\");\n}");
	if (!j.seen[0]) {
		helper_buf_str(&j.body, "\n");
		helper_buf_cat(&j.body, &begin);
		helper_buf_str(&j.body, "\n");
	}

	if (o->max_rate[0]) {
		/* Each CPU counts under its own key (no two race on one
		 * counter); once a second the sum of every possible CPU's key
		 * is checked against the budget.  bpftrace 0.17 cannot compare
		 * a count() value, hence the plain map. */
		unsigned c;

		helper_buf_str(&j.body, "\ninterval:s:1\n{\n\t$n = @__probekit_hits[0]");
		for (c = 1; c <= o->max_cpu; c++)
			helper_buf_printf(&j.body, " + @__probekit_hits[%u]", c);
		helper_buf_printf(&j.body, ";\n\tif ($n - @__probekit_last > %s) {\n"
			   "\t\tprintf(\"probekit-bpftrace: %%d probe hits/s is over --max-rate %s; detaching\\n\", "
			   "$n - @__probekit_last);\n\t\t@__pk_gate = 2;\n\t\texit();\n\t}\n\t@__probekit_last = $n;\n}\n",
			   o->max_rate, o->max_rate);
		helper_buf_str(&j.merged[1], "\tclear(@__probekit_hits);\n\tdelete(@__probekit_last);\n");
	}
	add_window(&j, o);
	helper_buf_cat(&out, &j.defs);
	helper_buf_str(&out, "");
	/* Put each merged BEGIN and END where its first block was. */
	for (tok = j.body.p; tok && *tok; ) {
		const char *hit = strchr(tok, '\002');

		if (!hit) {
			helper_buf_str(&out, tok);
			break;
		}
		helper_buf_add(&out, tok, (size_t)(hit - tok));
		key = hit[1] == 'B' ? 0 : 1;
		if (key == 0) {
			helper_buf_cat(&out, &begin);
		} else {
			helper_buf_str(&out, "END\n{\n");
			helper_buf_cat(&out, &j.merged[1]);
			helper_buf_str(&out, "}");
		}
		tok = strchr(hit + 1, '\002') + 1;
	}
	put_pids(&pids, &out, o->pid);
	*r = (struct join_result){.refs = j.refs, .nrefs = j.nrefs};
	emit(&pids, r);
	free(text.p);
	free(begin.p);
	free(out.p);
	free(pids.p);
	free(j.defs.p);
	free(j.body.p);
	free(j.merged[0].p);
	free(j.merged[1].p);
	for (i = 0; i < j.nhits; i++) {
		free(j.hit_ap[i]);
		free(j.hit_name[i]);
	}
	free(j.hit_ap);
	free(j.hit_name);
}

void join_result_free(struct join_result *r)
{
	int i;

	for (i = 0; i < r->nrefs; i++)
		free(r->refs[i].spec);
	free(r->refs);
	free(r->map);
	free(r->prog.p);
	*r = (struct join_result){0};
}

int join_command(int argc, char **argv)
{
	struct join_opts o = {0};
	struct join_result r;
	struct look_want *w;
	struct helper_buf link = {0};
	char *exe, ppid[24];
	int i, nw = 0;

	if (argc < 5)
		helper_die("probekit-scan join PID READY DURATION EXE SCRIPT...");
	o.pid = argv[0];
	o.ready = argv[1];
	o.duration = argv[2];
	exe = argv[3];
	o.exe = exe;
	o.max_rate = getenv("PROBEKIT_MAX_RATE") ? getenv("PROBEKIT_MAX_RATE") : "";
	/* bpftrace's PID: the wrapper's own, which execs it; the helper's
	 * parent when not given (a direct run, as test_readers makes). */
	snprintf(ppid, sizeof(ppid), "%ld", (long)getppid());
	o.gate_pid = getenv("PROBEKIT_GATE_PID") ? getenv("PROBEKIT_GATE_PID") : ppid;
	o.gate_open = getenv("PROBEKIT_GATE_OPEN") ? getenv("PROBEKIT_GATE_OPEN") : "";
	o.hits = getenv("PROBEKIT_HITS") ? getenv("PROBEKIT_HITS") : "";
	o.only_pid = getenv("PROBEKIT_ONLY_PID") ? getenv("PROBEKIT_ONLY_PID") : "";
	if (strspn(o.only_pid, "0123456789") != strlen(o.only_pid) || strlen(o.only_pid) > 10)
		helper_die("PROBEKIT_ONLY_PID wants a PID, in digits");
	if (!o.gate_pid[0] || strspn(o.gate_pid, "0123456789") != strlen(o.gate_pid) || strlen(o.gate_pid) > 10)
		helper_die("PROBEKIT_GATE_PID wants bpftrace's PID, in digits");
	if (strspn(o.gate_open, "abcdefghijklmnopqrstuvwxyz0123456789_ ") != strlen(o.gate_open))
		helper_die("PROBEKIT_GATE_OPEN wants syscall tracepoint names, blank-separated");
	if (o.hits[0] && strcmp(o.hits, "text") && strcmp(o.hits, "json"))
		helper_die("PROBEKIT_HITS wants text or json");
	if (o.max_rate[0] || o.hits[0]) {
		const char *mc = getenv("PROBEKIT_MAX_CPU");
		char *end;
		unsigned long v = mc ? strtoul(mc, &end, 10) : 0;

		if (strspn(o.max_rate, "0123456789") != strlen(o.max_rate) || strlen(o.max_rate) > 10 ||
		    !mc || !*mc || *end || v > 4095)
			helper_die("PROBEKIT_MAX_RATE wants digits, and with it or PROBEKIT_HITS PROBEKIT_MAX_CPU a CPU number 0..4095");
		o.max_cpu = (unsigned)v;
	}
	join_scripts(&o, argv + 4, argc - 4, &r);
	if (exe[0]) {
		look_link(exe, &link);
		printf("exe %s\n", link.p);
	}
	for (i = 0; i < r.nrefs; i++)
		printf("ref %d %zu %s %s\n", i + 1, r.refs[i].at, r.refs[i].kind, r.refs[i].spec);
	for (i = 0; i < r.nrefs; i++)
		if (r.refs[i].reads >= 0)
			printf("reads %d %d\n", i + 1, r.refs[i].reads);
	/* What the executable has, read in this same run: usdt and U name
	 * probes, the other kinds symbols; an address needs no look-up. */
	w = calloc((size_t)r.nrefs + 1, sizeof(*w));
	if (!w)
		helper_die("out of memory");
	for (i = 0; i < r.nrefs; i++) {
		bool usdt = !strcmp(r.refs[i].kind, "usdt") || !strcmp(r.refs[i].kind, "U");

		if (!usdt && r.refs[i].spec[0] >= '0' && r.refs[i].spec[0] <= '9')
			continue;
		w[nw++] = (struct look_want){.id = i + 1, .usdt = usdt, .spec = r.refs[i].spec};
	}
	if (exe[0] && nw) {
		look_find(w, nw, &exe, 1);
		for (i = 0; i < nw; i++)
			if (w[i].file == 0)
				printf("has %ld %d\n", w[i].id, w[i].usdt ? w[i].nargs : -1);
	}
	for (i = 0; i < r.nmap; i++)
		printf("map %ld %d %ld\n", r.map[i].at, r.map[i].file, r.map[i].line);
	fputs("program\n", stdout);
	fwrite(r.prog.p, 1, r.prog.len, stdout);
	free(w);
	free(link.p);
	join_result_free(&r);
	return fflush(stdout) ? 1 : 0;
}
