// SPDX-License-Identifier: BSD-2-Clause
/* args.NAME in usdt blocks (argnames.h says what).  A stapsdt note carries
 * operands only; the probekit note (probes/usdt/usdt_notes.h) carries each
 * argument's C type and name, so a script can say args.len where it said
 * arg4, and the same script reads io__submit's len (its fifth argument)
 * and io__done's (its fourth).  bpftrace's own args is its tracepoints'
 * (and, in newer bpftrace, a DWARF uprobe's); for usdt it has none, so the
 * name is resolved here, before bpftrace runs, and a mistake is one line. */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argnames.h"
#include "libbpf/probekit_common.spec.h"	/* SPEC_ARG_NO_NAMES: the tools' words */
#include "look.h"

static bool ident(char c)
{
	return c == '_' || isalnum((unsigned char)c);
}

size_t argnames_at(const char *s, size_t i, size_t n, size_t *name, size_t *len)
{
	size_t k = i + 4;

	if (k > n || strncmp(s + i, "args", 4))
		return 0;
	if (i > 0 && (ident(s[i - 1]) || strchr("$@.>", s[i - 1])))
		return 0;
	if (k < n && s[k] == '.')
		k++;
	else if (k + 1 < n && s[k] == '-' && s[k + 1] == '>')
		k += 2;
	else
		return 0;
	*name = k;
	while (k < n && ident(s[k]))
		k++;
	*len = k - *name;
	if (!*len || isdigit((unsigned char)s[*name]))
		return 0;
	return k - i;
}

bool argnames_used(const char *s, size_t a, size_t b)
{
	size_t i = a, name, len;

	while (i < b) {
		if (s[i] == '"' || (i + 1 < b && s[i] == '/' && (s[i + 1] == '/' || s[i + 1] == '*'))) {
			/* strings and comments, as join.c skips them */
			if (s[i] == '"') {
				for (i++; i < b && s[i] != '"'; i++)
					if (s[i] == '\\')
						i++;
				i++;
			} else if (s[i + 1] == '/') {
				while (i < b && s[i] != '\n')
					i++;
			} else {
				const char *e = memmem(s + i + 2, b - i - 2, "*/", 2);

				i = e ? (size_t)(e - s) + 2 : b;
			}
			continue;
		}
		if (argnames_at(s, i, b, &name, &len))
			return true;
		i++;
	}
	return false;
}

/* Whether the stapsdt notes of file have the probe spec ("provider:name",
 * or "name" of any provider). */
static bool has_probe(const char *file, const char *spec)
{
	const char *colon = strchr(spec, ':');
	size_t plen = colon ? (size_t)(colon - spec) : 0, n, i;
	struct usdt_note *notes;
	char err[512];
	bool has = false;

	if (usdt_notes_read(file, &notes, &n, err, sizeof(err)))
		helper_die("%s: %s", file, err);
	for (i = 0; i < n && !has; i++)
		has = colon ? strlen(notes[i].provider) == plen &&
			      !strncmp(notes[i].provider, spec, plen) &&
			      !strcmp(notes[i].name, colon + 1)
			    : !strcmp(notes[i].name, spec);
	usdt_notes_free(notes);
	return has;
}

/* No names for probe spec in file: it has the probe but not probekit's
 * note of it (the tools' words, toolspec.ARG_NO_NAMES; bpftrace's
 * argN counts from 0), or it has no such probe: misspelt (the tools'
 * "no USDT probe" line and its nearest, as bpftrace.sh says it without
 * args.NAME) or in a library, whose names args.NAME does not read. */
static void __attribute__((noreturn)) no_names(const char *file, const char *spec, const char *where)
{
	char near[LOOK_SPEC_MAX];
	char *files[] = { (char *)file };

	if (has_probe(file, spec))
		helper_die("%s: " SPEC_ARG_NO_NAMES, where, file, spec, "arg0");
	if (look_nearest(spec, files, 1, near, sizeof(near)) == 0)
		helper_die("%s: no USDT probe %s in %s" SPEC_NEAREST, where, spec, file, near);
	helper_die("%s: no USDT probe %s in %s, whose notes args.NAME reads; a probe in a library: give the argument by number, arg0 on",
		   where, spec, file);
}

/* The probekit notes of the one file a trace's usdt blocks name, read
 * once. */
static struct {
	char *file;
	struct usdt_probe_args *a;
	size_t n;
} seen;

const struct usdt_probe_args *argnames_probe(const char *file, const char *spec, const char *where)
{
	const struct usdt_probe_args *hit = NULL;
	const char *colon = strchr(spec, ':');
	char err[512];
	size_t i, plen = colon ? (size_t)(colon - spec) : 0;
	int matches = 0;

	if (strchr(spec, '*'))
		helper_die("%s: args names the arguments of one probe, and %s is a wildcard; name each probe, or read argN", where, spec);
	if (!seen.file || strcmp(seen.file, file)) {
		free(seen.a);
		free(seen.file);
		seen.a = NULL;
		seen.n = 0;
		seen.file = strdup(file);
		if (!seen.file)
			helper_die("out of memory");
		if (usdt_probe_args_read(file, &seen.a, &seen.n, err, sizeof(err)))
			helper_die("%s: %s", file, err);
	}
	for (i = 0; i < seen.n; i++) {
		const struct usdt_probe_args *p = &seen.a[i];

		if (colon ? strlen(p->provider) == plen && !strncmp(p->provider, spec, plen) &&
			    !strcmp(p->name, colon + 1)
			  : !strcmp(p->name, spec)) {
			hit = p;
			matches++;
		}
	}
	if (matches > 1)
		helper_die("%s: probe %s is in %d providers of %s; name it PROVIDER:%s", where, spec, matches,
			   file, spec);
	if (!hit)
		no_names(file, spec, where);
	return hit;
}

/* The cast that makes bpftrace read a signed C type as signed (its argN
 * is unsigned); "" for the rest. */
static const char *signed_cast(const char *type)
{
	static const char *const casts[][2] = {
		{"int8_t", "int8"}, {"int16_t", "int16"}, {"int32_t", "int32"}, {"int64_t", "int64"},
		{"signed char", "int8"}, {"short", "int16"}, {"int", "int32"}, {"long", "int64"},
		{"long long", "int64"}, {"ssize_t", "int64"}, {"off_t", "int64"},
	};
	size_t k;

	for (k = 0; k < sizeof(casts) / sizeof(casts[0]); k++)
		if (!strcmp(type, casts[k][0]))
			return casts[k][1];
	return "";
}

int argnames_put(struct helper_buf *out, const struct usdt_probe_args *pa, const char *name,
		 size_t len, bool as_string, const char *where)
{
	size_t best = (size_t)-1, d;
	const char *near = NULL, *cast;
	char want[USDT_NAME_MAX];
	int i;

	snprintf(want, sizeof(want), "%.*s", (int)(len < sizeof(want) ? len : sizeof(want) - 1), name);
	for (i = 0; i < pa->argc; i++) {
		if (!strcmp(pa->args[i].name, want))
			break;
		d = usdt_distance(pa->args[i].name, want);
		if (d < best) {
			best = d;
			near = pa->args[i].name;
		}
	}
	if (i == pa->argc) {
		if (near && best * 3 <= strlen(want) + 2)
			helper_die("%s: probe %s:%s has no argument %s; nearest: %s", where, pa->provider, pa->name,
				   want, near);
		helper_die("%s: probe %s:%s has no argument %s (it has %d)", where, pa->provider, pa->name, want,
			   pa->argc);
	}
	if (as_string && !usdt_type_is_string(pa->args[i].type))
		helper_die("%s: str(args.%s) reads a string, but %s of probe %s:%s is %s, not a char *",
			   where, want, want, pa->provider, pa->name, pa->args[i].type);
	cast = signed_cast(pa->args[i].type);
	if (*cast)
		helper_buf_printf(out, "(%s)arg%d", cast, i);
	else
		helper_buf_printf(out, "arg%d", i);
	return i;
}
