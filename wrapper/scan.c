// SPDX-License-Identifier: BSD-2-Clause
/* probekit-scan: probekit-bpftrace's helper (wrapper/bpftrace.sh), which
 * does its ELF reading and script joining in one quick process instead of
 * awk over readelf.  Not a user command: it speaks to the wrapper in
 * lines, as below, and its errors are the wrapper's.
 *
 *   probekit-scan join PID READY DURATION EXE SCRIPT...
 *	Join bpftrace scripts into one program, and read the executable
 *	EXE for the probes they name: join.c says how, and the lines it
 *	prints ("exe", "ref", "has", "map", then "program" and the program).
 *	One run does what the wrapper needs when the executable holds every
 *	probe.
 *   probekit-scan has FILE...
 *	Read the want-list "N<TAB>usdt|syms<TAB>SPEC\n"... on stdin; print
 *	"N I\n" for each reference, with I the index of the first FILE that
 *	has it.  Files are read in order until every reference is found
 *	(look.h says what "has" means).
 *   probekit-scan nearest SPEC FILE...
 *	For a usdt SPEC none of the FILEs has: "I<TAB>PROVIDER:NAME", the
 *	nearest probe by edit distance and the index of its FILE, when it is
 *	near enough to be what was meant.
 *   probekit-scan build-id FILE
 *	"exe LEN:TARGET", the target of the link FILE as join prints it,
 *	then "build-id HEX", FILE's GNU build-id (no such line when it has
 *	none or is not ELF).
 *   probekit-scan notes FILE
 *	Its USDT notes, one a line: provider, name, pc, pc_off, sema,
 *	sema_off (hex) and spec, tab-separated.
 *   probekit-scan args [--machine aarch64|x86_64] SPEC
 *	The arguments of a spec of a file of that machine (x86_64 unless
 *	given), one a line: kind, size, signed, val, reg, readable by
 *	bpftrace, readable by libbpf, index register, scale.
 *
 * The notes and args commands show what the C reader of notes
 * (probes/usdt/) reads, for tests/probes/test_readers.py to hold against the
 * Python one.  Every failure is one line on stderr, prefixed as the
 * wrapper's own, and exit status 1. */

#include <elf.h>
#include <errno.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper.h"
#include "join.h"
#include "look.h"
#include "usdt_notes.h"

/* The most references a want-list may hold. */
#define WANT_MAX 4096

/* Read the want-list from stdin. */
static int read_wants(struct look_want **out)
{
	struct look_want *w = NULL;
	char line[LOOK_SPEC_MAX + 64], *tab, *kind, *end, *spec;
	int n = 0;

	while (fgets(line, sizeof(line), stdin)) {
		if (!strchr(line, '\n') && !feof(stdin))
			helper_die("a want-list line is longer than %zu bytes", sizeof(line) - 1);
		line[strcspn(line, "\n")] = '\0';
		if (!*line)
			continue;
		if (n == WANT_MAX)
			helper_die("more than %d probe references", WANT_MAX);
		w = realloc(w, (size_t)(n + 1) * sizeof(*w));
		if (!w)
			helper_die("out of memory");
		errno = 0;
		w[n].id = strtol(line, &end, 10);
		kind = end + 1;
		tab = *end == '\t' ? strchr(kind, '\t') : NULL;
		if (!tab || errno || w[n].id <= 0)
			helper_die("want-list line '%.60s' is not N<TAB>usdt|syms<TAB>SPEC", line);
		*tab = '\0';
		w[n].usdt = !strcmp(kind, "usdt");
		spec = strdup(tab + 1);
		if (!spec)
			helper_die("out of memory");
		w[n].spec = spec;
		n++;
	}
	*out = w;
	return n;
}

/* In the order of the files, then of the want-list. */
static int cmd_has(int argc, char **argv)
{
	struct look_want *w;
	int nw = read_wants(&w), f, k;

	look_find(w, nw, argv, argc);
	for (f = 0; f < argc; f++)
		for (k = 0; k < nw; k++)
			if (w[k].file == f)
				printf("%ld %d %d\n", w[k].id, f, w[k].usdt ? w[k].nargs : -1);
	for (k = 0; k < nw; k++)
		free((char *)w[k].spec);
	free(w);
	return fflush(stdout) ? 1 : 0;
}

static int cmd_nearest(int argc, char **argv)
{
	char found[2 * USDT_NAME_MAX + 1];
	int at;

	if (argc < 2)
		helper_die("probekit-scan nearest SPEC FILE...");
	at = look_nearest(argv[0], argv + 1, argc - 1, found, sizeof(found));
	if (at >= 0)
		printf("%d\t%s\n", at, found);
	return fflush(stdout) ? 1 : 0;
}

static int cmd_build_id(const char *path)
{
	struct helper_buf link = {0}, id = {0};

	look_build_id(path, &id);
	look_link(path, &link);
	printf("exe %s\n", link.p);
	if (id.len)
		printf("build-id %s\n", id.p);
	free(link.p);
	free(id.p);
	return fflush(stdout) ? 1 : 0;
}

static int cmd_notes(const char *path)
{
	struct usdt_note *notes;
	size_t n, i;
	char err[512];

	if (usdt_notes_read(path, &notes, &n, err, sizeof(err)))
		helper_die("%s", err);
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
		helper_die("usage: probekit-scan args [--machine aarch64|x86_64] SPEC");
	n = usdt_args_parse(argv[argc - 1], machine, args, USDT_ARGC_MAX, err, sizeof(err));
	if (n < 0)
		helper_die("%s", err);
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
		helper_die("libelf is too old (%s)", elf_errmsg(-1));
	if (argc >= 2 && !strcmp(argv[1], "join"))
		return join_command(argc - 2, argv + 2);
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
	helper_die("probekit-scan is probekit-bpftrace's helper; usage: probekit-scan join|has|nearest|build-id|notes|args ...");
}
