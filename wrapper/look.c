// SPDX-License-Identifier: BSD-2-Clause
/* What an ELF file has, in bpftrace's terms (look.h). */

#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "look.h"
#include "usdt_notes.h"

/* bpftrace's one wildcard in a usdt or uprobe name: '*'.  '?' and '[...]'
 * are themselves to it (0.17, 0.23 and 0.27 alike: pkexe:t?ck and
 * pkexe:t[i]ck attach nothing where pkexe:tick exists), so here too,
 * and such a name is reported missing, with its nearest. */
static bool glob(const char *g, const char *s)
{
	const char *star = NULL, *back = NULL;

	while (*s) {
		if (*g == '*') {
			star = g++;
			back = s;
		} else if (*g == *s) {
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

/* How many arguments a probe site has: its spec's words. */
static int note_nargs(const struct usdt_note *note)
{
	int n = 0;
	const char *p = note->spec;

	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		n++;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
	return n;
}

static bool usdt_matches(const struct look_want *w, const struct usdt_note *note)
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

/* Give the symbol wants that elf's symbol tables satisfy, and that no
 * earlier file had, the file f; the count. */
static int match_symbols(Elf *elf, struct look_want *w, int nw, int f)
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
			helper_die("corrupt symbol table (%s)", elf_errmsg(-1));
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
				if (w[k].file >= 0 || w[k].usdt || !glob(w[k].spec, plain))
					continue;
				w[k].file = f;
				hits++;
			}
		}
	}
	return hits;
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
		helper_die("%s: %s", path, err);
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
		helper_die("%s: %s", path, err);
	return elf;
}

void look_find(struct look_want *w, int nw, char *const *files, int nfiles)
{
	struct usdt_note *notes;
	size_t nn, i;
	int left = nw, f, k, fd;
	unsigned long long size;
	bool any_usdt = false, any_syms = false;
	char err[512];
	Elf *elf;

	for (k = 0; k < nw; k++) {
		w[k].file = -1;
		any_usdt |= w[k].usdt;
		any_syms |= !w[k].usdt;
	}
	for (f = 0; f < nfiles && left > 0; f++) {
		elf = open_elf(files[f], &fd, &size);
		if (!elf)
			continue;
		if (any_syms)
			left -= match_symbols(elf, w, nw, f);
		if (any_usdt) {
			if (usdt_notes_read_elf(elf, size, &notes, &nn, err, sizeof(err)))
				helper_die("%s: %s", files[f], err);
			for (k = 0; k < nw; k++) {
				bool here = w[k].file < 0;

				/* Every site a want matches in this file counts: a
				 * script's argN must be on each of them. */
				for (i = 0; i < nn && here && w[k].usdt; i++) {
					if (!usdt_matches(&w[k], &notes[i]))
						continue;
					if (w[k].file < 0) {
						w[k].file = f;
						w[k].nargs = note_nargs(&notes[i]);
						left--;
					} else if (note_nargs(&notes[i]) < w[k].nargs) {
						w[k].nargs = note_nargs(&notes[i]);
					}
				}
			}
			usdt_notes_free(notes);
		}
		elf_end(elf);
		close(fd);
	}
}

int look_nearest(const char *spec, char *const *files, int nfiles, char *found, size_t cap)
{
	struct usdt_note *notes;
	size_t nn, i, d, best = (size_t)-1;
	unsigned long long size;
	char full[2 * USDT_NAME_MAX + 1], err[512];
	int f, fd, at = -1;
	bool by_name;
	Elf *elf;

	if (strlen(spec) > LOOK_SPEC_MAX)
		helper_die("a probe name of more than %d bytes", LOOK_SPEC_MAX);
	by_name = !strchr(spec, ':');
	for (f = 0; f < nfiles; f++) {
		elf = open_elf(files[f], &fd, &size);
		if (!elf)
			continue;
		if (usdt_notes_read_elf(elf, size, &notes, &nn, err, sizeof(err)))
			helper_die("%s: %s", files[f], err);
		for (i = 0; i < nn; i++) {
			snprintf(full, sizeof(full), "%s:%s", notes[i].provider, notes[i].name);
			d = usdt_distance(by_name ? notes[i].name : full, spec);
			if (d < best) {
				best = d;
				at = f;
				snprintf(found, cap, "%s", full);
			}
		}
		usdt_notes_free(notes);
		elf_end(elf);
		close(fd);
	}
	return at >= 0 && best * 3 <= strlen(spec) ? at : -1;
}

void look_build_id(const char *path, struct helper_buf *out)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Nhdr nh;
	Elf_Data *data;
	size_t off, next, name_off, desc_off, i;
	int fd;
	unsigned long long size;
	Elf *elf = open_elf(path, &fd, &size);

	if (!elf)
		return;
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
				helper_buf_printf(out, "%02x", ((unsigned char *)data->d_buf)[desc_off + i]);
			goto out;
		}
	}
out:
	elf_end(elf);
	close(fd);
}

void look_link(const char *path, struct helper_buf *out)
{
	char target[PATH_MAX + 1];
	ssize_t len = readlink(path, target, sizeof(target));

	if (len < 0 && errno == EINVAL && strlen(path) <= PATH_MAX) {
		helper_buf_printf(out, "%zu:", strlen(path));	/* a file, not a link */
		helper_buf_str(out, path);
	} else if (len < 0 || len > PATH_MAX) {
		helper_buf_str(out, "-");
	} else {
		helper_buf_printf(out, "%zd:", len);
		helper_buf_add(out, target, (size_t)len);
	}
}
