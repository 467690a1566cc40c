// SPDX-License-Identifier: BSD-2-Clause
/*
 * usdt_sites.c: see usdt_sites.h.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/user.h>

#include <bpf/libbpf.h>

#include "usdt_sites.h"

/* A line of /proc/PID/maps: an address range, perms, offset, device,
 * inode, path (PATH_MAX at most). */
#define MAPS_LINE_MAX (PATH_MAX + 128)

/* Add the binary shown (a path in t's mount namespace) unless present. */
static int add_bin(struct usdt_sites *s, const struct target *t,
		   const char *shown, bool exe)
{
	struct usdt_bin *b;
	char err[256];
	struct usdt_note *notes;
	size_t n;
	int len;

	for (size_t i = 0; i < s->nbins; i++)
		if (!strcmp(s->bins[i].shown, shown))
			return 0;
	if (s->nbins == USDT_BINS_MAX) {
		tool_err("PID %d maps more than %d executable files; tracing "
			 "the first %d", (int)t->pid, USDT_BINS_MAX,
			 USDT_BINS_MAX);
		return -E2BIG;
	}
	b = &s->bins[s->nbins];
	memset(b, 0, sizeof(*b));
	if (t->pid > 0)
		len = snprintf(b->path, sizeof(b->path), "/proc/%d/root%s",
			       (int)t->pid, shown);
	else
		len = snprintf(b->path, sizeof(b->path), "%s", shown);
	if (len < 0 || (size_t)len >= sizeof(b->path))
		return exe ? (tool_err("%s: path too long", shown), -ENAMETOOLONG)
			   : 0;
	snprintf(b->shown, sizeof(b->shown), "%s", shown);
	if (usdt_notes_read(b->path, &notes, &n, err, sizeof(err))) {
		/* A library that is no ELF file (a mapped font, a JIT
		 * cache) has no probes to offer; the executable must. */
		if (!exe)
			return 0;
		tool_err("cannot read the USDT probes of %s: %s", shown, err);
		return -EINVAL;
	}
	b->notes = notes;
	b->n = n;
	s->nbins++;
	return 0;
}

/* The files t maps executable, in the order of their first mapping. */
static int add_libs(struct usdt_sites *s, const struct target *t)
{
	char path[64], *line = malloc(MAPS_LINE_MAX);
	FILE *f;
	int err = 0;

	if (!line)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)t->pid);
	f = fopen(path, "r");
	if (!f) {
		err = -errno;
		tool_err("cannot read %s: %s", path, strerror(-err));
		free(line);
		return err;
	}
	while (!err && fgets(line, MAPS_LINE_MAX, f)) {
		char perms[8], *file = strchr(line, '/');
		size_t len;

		if (sscanf(line, "%*s %7s", perms) != 1 || !strchr(perms, 'x') ||
		    !file)
			continue;
		len = strlen(file);
		if (len && file[len - 1] == '\n')
			file[--len] = '\0';
		/* A file replaced on disk since it was mapped: its probes
		 * are no longer at any path. */
		if (len > 10 && !strcmp(file + len - 10, " (deleted)"))
			continue;
		err = add_bin(s, t, file, false);
	}
	fclose(f);
	free(line);
	return err == -E2BIG ? 0 : err;
}

int usdt_sites_open(struct usdt_sites *s, const struct target *t)
{
	int err;

	memset(s, 0, sizeof(*s));
	s->bins = calloc(USDT_BINS_MAX, sizeof(*s->bins));
	if (!s->bins) {
		tool_err("cannot read the USDT probes: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	err = add_bin(s, t, t->exe, true);
	if (!err && t->pid > 0)
		err = add_libs(s, t);
	if (err)
		usdt_sites_close(s);
	return err;
}

void usdt_sites_close(struct usdt_sites *s)
{
	for (size_t i = 0; i < s->nlinks; i++)
		bpf_link__destroy(s->links[i]);
	free(s->links);
	for (size_t i = 0; i < s->nbins; i++)
		usdt_notes_free(s->bins[i].notes);
	free(s->bins);
	memset(s, 0, sizeof(*s));
}

void usdt_probe_name(const struct usdt_note *n, char *out, size_t len)
{
	snprintf(out, len, "%s:%s", n->provider, n->name);
}

bool usdt_probe_valid(const char *probe, bool glob)
{
	const char *colon = strchr(probe, ':');
	size_t plen, nlen;

	/* A pattern may be a bare name: of any provider. */
	if (!colon && glob)
		colon = probe - 1;
	if (!colon || strchr(colon + 1, ':'))
		return false;
	plen = colon < probe ? 1 : (size_t)(colon - probe);
	nlen = strlen(colon + 1);
	if (!plen || !nlen || plen >= USDT_NAME_MAX || nlen >= USDT_NAME_MAX)
		return false;
	for (const char *p = probe; *p; p++) {
		if (isalnum((unsigned char)*p) || *p == '_' || *p == ':' ||
		    (glob && strchr("*?[]!-", *p)))
			continue;
		return false;
	}
	return true;
}

/* --- argument operands --------------------------------------------------- */

/* x86-64 register names, every width, and where struct pt_regs keeps
 * the register (its layout is user_regs_struct's first 21 fields). */
static const struct {
	const char *names[4];
	size_t off;
} regs[] = {
#define R(a, b, c, d, f) { { a, b, c, d }, offsetof(struct user_regs_struct, f) }
	R("rax", "eax", "ax", "al", rax),
	R("rbx", "ebx", "bx", "bl", rbx),
	R("rcx", "ecx", "cx", "cl", rcx),
	R("rdx", "edx", "dx", "dl", rdx),
	R("rsi", "esi", "si", "sil", rsi),
	R("rdi", "edi", "di", "dil", rdi),
	R("rbp", "ebp", "bp", "bpl", rbp),
	R("rsp", "esp", "sp", "spl", rsp),
	R("r8", "r8d", "r8w", "r8b", r8),
	R("r9", "r9d", "r9w", "r9b", r9),
	R("r10", "r10d", "r10w", "r10b", r10),
	R("r11", "r11d", "r11w", "r11b", r11),
	R("r12", "r12d", "r12w", "r12b", r12),
	R("r13", "r13d", "r13w", "r13b", r13),
	R("r14", "r14d", "r14w", "r14b", r14),
	R("r15", "r15d", "r15w", "r15b", r15),
	R("rip", "eip", NULL, NULL, rip),
#undef R
};

static int reg_offset(const char *name, __u32 *off)
{
	if (*name == '%')
		name++;
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (int w = 0; w < 4; w++)
			if (regs[i].names[w] && !strcmp(regs[i].names[w], name)) {
				*off = regs[i].off;
				return 0;
			}
	return -ENOENT;
}

static const char *kind_name(enum usdt_arg_kind k)
{
	switch (k) {
	case USDT_ARG_RIP_SYM:
		return "a symbol-relative %rip operand";
	case USDT_ARG_SIB:
		return "a scale-index-base operand";
	case USDT_ARG_CONST:
		return "an immediate";
	default:
		return "an operand of a form it does not know";
	}
}

int usdt_site_arg_of(const struct usdt_bin *b, const struct usdt_note *n,
		     int argn, struct usdt_site_arg *out)
{
	struct usdt_arg args[USDT_ARGC_MAX], *a;
	char probe[USDT_PROBE_MAX], err[256];
	int argc;

	usdt_probe_name(n, probe, sizeof(probe));
	argc = usdt_args_parse(n->spec, args, USDT_ARGC_MAX, err, sizeof(err));
	if (argc < 0) {
		tool_err("%s in %s: cannot parse its arguments \"%.64s\": %s",
			 probe, b->shown, n->spec, err);
		return -EINVAL;
	}
	if (argn > argc) {
		tool_err("%s has no argument %d (it has %d)", probe, argn, argc);
		return -EINVAL;
	}
	a = &args[argn - 1];
	memset(out, 0, sizeof(*out));
	out->size = a->size;
	out->is_signed = a->is_signed;
	out->val = a->val;
	if (!usdt_arg_readable_libbpf(a) ||
	    (a->kind != USDT_ARG_CONST && reg_offset(a->reg, &out->reg_off))) {
		tool_err("cannot read arg%d of %s: %s (at 0x%llx in %s) is %s, "
			 "which libbpf 1.1 cannot read; pass the value through "
			 "a register at the probe", argn, probe, a->text, n->pc,
			 b->shown, kind_name(a->kind));
		return -EINVAL;
	}
	switch (a->kind) {
	case USDT_ARG_CONST:
		out->kind = USDT_SITE_CONST;
		break;
	case USDT_ARG_REG:
		out->kind = USDT_SITE_REG;
		break;
	default:
		out->kind = USDT_SITE_DEREF;
		break;
	}
	return 0;
}

/* --- attaching ------------------------------------------------------------ */

int usdt_sites_attach(struct usdt_sites *s, struct bpf_program *prog,
		      const struct target *t, const struct usdt_bin *b,
		      const struct usdt_note *n, __u64 cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = n->sema_off,
		    .bpf_cookie = cookie);
	char probe[USDT_PROBE_MAX];
	struct bpf_link *link, **links;
	int err;

	links = realloc(s->links, (s->nlinks + 1) * sizeof(*links));
	if (!links) {
		tool_err("cannot attach: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->links = links;
	link = bpf_program__attach_uprobe_opts(prog, t->pid > 0 ? t->pid : -1,
					       b->path, n->pc_off, &opts);
	if (link) {
		s->links[s->nlinks++] = link;
		return 0;
	}
	err = -errno;
	usdt_probe_name(n, probe, sizeof(probe));
	if (err == -EINVAL && n->sema_off)
		tool_err("cannot attach to %s at 0x%llx in %s: %s (is another "
			 "tracer attached there with another semaphore "
			 "offset?)", probe, n->pc, b->shown, strerror(-err));
	else
		tool_err("cannot attach to %s at 0x%llx in %s: %s%s", probe,
			 n->pc, b->shown, strerror(-err),
			 err == -EPERM || err == -EACCES ?
			 " (tracing needs root, or CAP_SYS_ADMIN)" : "");
	return err;
}

/* --- a probe that is not there -------------------------------------------- */

/* Levenshtein distance between a and b, capped at their length bound. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[USDT_PROBE_MAX + 1];

	if (la > USDT_PROBE_MAX || lb > USDT_PROBE_MAX)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

void usdt_sites_missing(const struct usdt_sites *s, const struct target *t,
			const char *pattern, bool glob)
{
	char where[PATH_MAX + 300], probe[USDT_PROBE_MAX], best[USDT_PROBE_MAX];
	size_t dmin = SIZE_MAX;

	if (t->pid > 0)
		snprintf(where, sizeof(where), "PID %d (%s) or the files it maps",
			 (int)t->pid, t->comm);
	else
		snprintf(where, sizeof(where), "%s", t->exe);
	best[0] = '\0';
	for (size_t i = 0; i < s->nbins; i++)
		for (size_t k = 0; k < s->bins[i].n; k++) {
			size_t d;

			usdt_probe_name(&s->bins[i].notes[k], probe,
					sizeof(probe));
			d = distance(pattern, probe);
			if (d < dmin) {
				dmin = d;
				snprintf(best, sizeof(best), "%s", probe);
			}
		}
	tool_err("no USDT probe %s%s in %s%s%s", glob ? "matches " : "",
		 pattern, where, best[0] ? "; nearest: " : " (it has none)",
		 best);
}

bool usdt_probe_match(const char *pattern, const struct usdt_note *n)
{
	char probe[USDT_PROBE_MAX];

	if (!strchr(pattern, ':'))
		return !fnmatch(pattern, n->name, 0);
	usdt_probe_name(n, probe, sizeof(probe));
	return !fnmatch(pattern, probe, 0);
}
