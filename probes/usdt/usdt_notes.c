// SPDX-License-Identifier: BSD-2-Clause
/* Systemtap USDT notes through libelf; see usdt_notes.h.
 *
 * A stapsdt note (type 3, owner "stapsdt") describes one probe site: three
 * addresses of the file's word size and byte order (the site, .stapsdt.base
 * as linked, the semaphore or 0), then three NUL-terminated strings
 * (provider, name, argument spec).  Where the file was prelinked,
 * .stapsdt.base moved from the address the note recorded, and the site and
 * semaphore moved with it. */

#include "usdt_notes.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NT_STAPSDT 3

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int usdt_file_offset(Elf *elf, unsigned long long addr, unsigned long long *off)
{
	size_t i, n;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (addr >= ph.p_vaddr && addr - ph.p_vaddr < ph.p_filesz) {
			*off = addr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -1;
}

static unsigned long long read_word(const unsigned char *p, int size, bool msb);

/* Section header i of a file image d: its name, type, offset, size, link. */
struct raw_shdr {
	unsigned long long name, type, off, size, link;
};

static void raw_shdr(const unsigned char *d, unsigned long long shoff, bool is64, bool msb,
		     unsigned long long i, struct raw_shdr *h)
{
	const unsigned char *p = d + shoff + i * (is64 ? 64 : 40);
	int w = is64 ? 8 : 4;

	h->name = read_word(p, 4, msb);
	h->type = read_word(p + 4, 4, msb);
	h->off = read_word(p + 8 + 2 * w, w, msb);
	h->size = read_word(p + 8 + 3 * w, w, msb);
	h->link = read_word(p + 8 + 4 * w, 4, msb);
}

/* The checks of notes.py's twin, elf.py's check(), in the same order and
 * words, on the file's raw bytes: no count or size the file claims is
 * used before it is known to lie inside the file. */
static int raw_check(const unsigned char *d, unsigned long long size, char *err, size_t errlen)
{
	unsigned long long phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx, i;
	unsigned ehsize, phsize, shsize;
	struct raw_shdr h, names;
	bool is64, msb;
	int w;

	if (!d || size < 16 || memcmp(d, "\x7f" "ELF", 4))
		return fail(err, errlen, "not an ELF file");
	if (d[EI_CLASS] != ELFCLASS32 && d[EI_CLASS] != ELFCLASS64)
		return fail(err, errlen, "corrupt: its ELF class is %u, neither 1 (32-bit) nor 2 (64-bit)",
			    d[EI_CLASS]);
	if (d[EI_DATA] != ELFDATA2LSB && d[EI_DATA] != ELFDATA2MSB)
		return fail(err, errlen, "corrupt: its byte order is %u, neither 1 (little-endian) nor 2 (big-endian)",
			    d[EI_DATA]);
	is64 = d[EI_CLASS] == ELFCLASS64;
	msb = d[EI_DATA] == ELFDATA2MSB;
	ehsize = is64 ? 64 : 52;
	phsize = is64 ? 56 : 32;
	shsize = is64 ? 64 : 40;
	w = is64 ? 8 : 4;
	if (size < ehsize)
		return fail(err, errlen, "truncated: its ELF header runs past the end of the file (%llu bytes)", size);
	phoff = read_word(d + 24 + w, w, msb);
	shoff = read_word(d + 24 + 2 * w, w, msb);
	phentsize = read_word(d + ehsize - 10, 2, msb);
	phnum = read_word(d + ehsize - 8, 2, msb);
	shentsize = read_word(d + ehsize - 6, 2, msb);
	shnum = read_word(d + ehsize - 4, 2, msb);
	shstrndx = read_word(d + ehsize - 2, 2, msb);
	if (shoff) {
		if (shentsize != shsize)
			return fail(err, errlen, "corrupt: its section headers are %llu bytes each, not %u",
				    shentsize, shsize);
		if (shoff > size || (shnum ? shnum : 1) * shsize > size - shoff)
			return fail(err, errlen, "truncated: its section headers run past the end of the file (%llu bytes)",
				    size);
		if (!shnum) {	/* more than 0xff00: in section 0 */
			raw_shdr(d, shoff, is64, msb, 0, &h);
			shnum = h.size;
			if (shnum > (size - shoff) / shsize)
				return fail(err, errlen, "truncated: its section headers run past the end of the file (%llu bytes)",
					    size);
		}
	} else {
		shnum = 0;
	}
	if (phoff && phnum) {
		if (phentsize != phsize)
			return fail(err, errlen, "corrupt: its program headers are %llu bytes each, not %u",
				    phentsize, phsize);
		if (phoff > size || phnum * phsize > size - phoff)
			return fail(err, errlen, "truncated: its program headers run past the end of the file (%llu bytes)",
				    size);
	}
	if (!shnum)
		return 0;
	if (shstrndx == SHN_XINDEX) {
		raw_shdr(d, shoff, is64, msb, 0, &h);
		shstrndx = h.link;
	}
	if (!shstrndx || shstrndx >= shnum)
		return fail(err, errlen, "corrupt: its section name table is section %llu, not one of its %llu sections",
			    shstrndx, shnum);
	for (i = 1; i < shnum; i++) {
		raw_shdr(d, shoff, is64, msb, i, &h);
		if (h.type != SHT_NOBITS && (h.off > size || h.size > size - h.off))
			return fail(err, errlen, "truncated: section %llu runs past the end of the file (%llu bytes)",
				    i, size);
	}
	raw_shdr(d, shoff, is64, msb, shstrndx, &names);
	if (names.type != SHT_STRTAB)
		return fail(err, errlen, "corrupt: its section name table (section %llu) is not a string table",
			    shstrndx);
	for (i = 1; i < shnum; i++) {
		raw_shdr(d, shoff, is64, msb, i, &h);
		if (h.name >= names.size)
			return fail(err, errlen, "corrupt: the name of section %llu lies outside its section name table",
				    i);
	}
	return 0;
}

int usdt_elf_check(Elf *elf, unsigned long long file_size, char *err, size_t errlen)
{
	size_t raw_size = 0;
	const unsigned char *d = (const unsigned char *)elf_rawfile(elf, &raw_size);
	GElf_Ehdr eh;
	size_t nsec;

	if (raw_check(d, file_size < raw_size ? file_size : raw_size, err, errlen))
		return -1;
	/* What libelf still refuses after all that. */
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || elf_getshdrnum(elf, &nsec))
		return fail(err, errlen, "corrupt ELF header (%s)", elf_errmsg(-1));
	return 0;
}

static unsigned long long read_word(const unsigned char *p, int size, bool msb)
{
	unsigned long long v = 0;
	int i;

	for (i = 0; i < size; i++)
		v |= (unsigned long long)p[msb ? size - 1 - i : i] << (8 * i);
	return v;
}

/* The first byte of s[0, len) that no provider or probe name has (a
 * control or non-ASCII byte, a space, a colon), or with spec none that an
 * argument spec has (a control or non-ASCII byte); -1 when there is none. */
static int bad_byte(const unsigned char *s, size_t len, bool spec)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f || (!spec && (s[i] == ' ' || s[i] == ':')))
			return s[i];
	return -1;
}

/* Copy the field (provider, name or spec: what) at *p, which must end with
 * a NUL before end, into dst of cap bytes and move *p past it; NULL, or the
 * cause in why.  The checks and their order are notes.py's _string. */
static const char *take_field(const unsigned char **p, const unsigned char *end,
			      const char *what, char *dst, size_t cap, bool spec,
			      char *why, size_t whylen)
{
	const unsigned char *nul = memchr(*p, '\0', (size_t)(end - *p));
	size_t len;
	int b;

	if (!nul) {
		snprintf(why, whylen, "its %s is not NUL-terminated inside the note", what);
		return why;
	}
	len = (size_t)(nul - *p);
	if (len >= cap) {
		snprintf(why, whylen, "its %s is longer than %zu bytes", what, cap - 1);
		return why;
	}
	if (!len && !spec) {
		snprintf(why, whylen, "its %s is empty", what);
		return why;
	}
	b = bad_byte(*p, len, spec);
	if (b >= 0) {
		snprintf(why, whylen, "its %s has %s (0x%02x)", what,
			 spec ? "a control or non-ASCII byte" : "a control, non-ASCII, space or colon byte", b);
		return why;
	}
	memcpy(dst, *p, len + 1);
	*p = nul + 1;
	return NULL;
}

/* The file's e_machine, 0 when its header cannot be read. */
static int file_machine(Elf *elf)
{
	GElf_Ehdr eh;

	return gelf_getehdr(elf, &eh) ? eh.e_machine : 0;
}

/* One note's description into *note: NULL, or the cause in why. */
static const char *parse_note(Elf *elf, const unsigned char *desc, size_t size,
			      bool have_base, unsigned long long base_addr,
			      struct usdt_note *note, char *why, size_t whylen)
{
	int word = gelf_getclass(elf) == ELFCLASS64 ? 8 : 4;
	bool msb = elf_getident(elf, NULL)[EI_DATA] == ELFDATA2MSB;
	unsigned long long base;
	const unsigned char *p, *end;

	memset(note, 0, sizeof(*note));
	if (size < 3 * (size_t)word) {
		snprintf(why, whylen, "its description of %zu bytes is shorter than its three %d-byte addresses",
			 size, word);
		return why;
	}
	note->pc = read_word(desc, word, msb);
	base = read_word(desc + word, word, msb);
	note->sema = read_word(desc + 2 * word, word, msb);
	if (have_base && base) {
		note->pc += base_addr - base;
		if (note->sema)
			note->sema += base_addr - base;
	}
	p = desc + 3 * word;
	end = desc + size;
	if (take_field(&p, end, "provider", note->provider, sizeof(note->provider), false, why, whylen) ||
	    take_field(&p, end, "probe name", note->name, sizeof(note->name), false, why, whylen) ||
	    take_field(&p, end, "argument spec", note->spec, sizeof(note->spec), true, why, whylen))
		return why;
	note->machine = file_machine(elf);
	if (usdt_file_offset(elf, note->pc, &note->pc_off))
		note->pc_off = 0;
	if (!note->sema || usdt_file_offset(elf, note->sema, &note->sema_off))
		note->sema_off = 0;
	return NULL;
}

static size_t align_up(size_t n, size_t align)
{
	return (n + align - 1) / align * align;
}

/* Append the notes of one SHT_NOTE section to *out.  The section is walked
 * in its raw bytes (the file's byte order), as notes.py's _notes walks it:
 * each note's header, name and description must lie inside the section,
 * and a stapsdt note must read whole; the error names the note's file
 * offset. */
static int read_section(Elf *elf, Elf_Scn *scn, bool have_base,
			unsigned long long base_addr, struct usdt_note **out,
			size_t *n, size_t *cap, char *err, size_t errlen)
{
	Elf_Data *data = elf_rawdata(scn, NULL);
	bool msb = elf_getident(elf, NULL)[EI_DATA] == ELFDATA2MSB;
	const unsigned char *d;
	size_t off = 0, size, align, name_at, desc_at;
	unsigned long long namesz, descsz, type;
	char why[256];
	const char *cause;
	GElf_Shdr sh;

	if (!data || !gelf_getshdr(scn, &sh))
		return fail(err, errlen, "cannot read its .note.stapsdt section (%s)", elf_errmsg(-1));
	d = data->d_buf;
	size = data->d_size;
	align = sh.sh_addralign == 8 ? 8 : 4;
	while (off < size) {
		cause = NULL;
		if (size - off < 12) {
			cause = "its 12-byte header runs past the end of .note.stapsdt";
			goto bad;
		}
		namesz = read_word(d + off, 4, msb);
		descsz = read_word(d + off + 4, 4, msb);
		type = read_word(d + off + 8, 4, msb);
		name_at = off + 12;
		desc_at = name_at + align_up((size_t)namesz, align);
		if (desc_at > size || descsz > size - desc_at) {
			snprintf(why, sizeof(why), "its name (%llu bytes) and description (%llu bytes) run past the end of .note.stapsdt",
				 namesz, descsz);
			cause = why;
			goto bad;
		}
		if (type == NT_STAPSDT && namesz == sizeof("stapsdt") &&
		    !memcmp(d + name_at, "stapsdt", sizeof("stapsdt"))) {
			if (*n == USDT_NOTES_MAX)
				return fail(err, errlen, "more than %d stapsdt notes", USDT_NOTES_MAX);
			if (*n == *cap) {
				size_t ncap = *cap ? *cap * 2 : 64;
				struct usdt_note *grown = realloc(*out, ncap * sizeof(**out));

				if (!grown)
					return fail(err, errlen, "out of memory");
				*out = grown;
				*cap = ncap;
			}
			cause = parse_note(elf, d + desc_at, (size_t)descsz, have_base, base_addr,
					   *out + *n, why, sizeof(why));
			if (cause)
				goto bad;
			(*n)++;
		}
		off = desc_at + align_up((size_t)descsz, align);
	}
	return 0;
bad:
	return fail(err, errlen, "the stapsdt note at file offset 0x%llx is corrupt: %s",
		    (unsigned long long)sh.sh_offset + off, cause);
}

/* One probekit note's description into *a: NULL, or the cause in why.
 * The checks and their order are notes.py's _arg_names. */
static const char *parse_pk_note(Elf *elf, const unsigned char *desc, size_t size,
				 struct usdt_probe_args *a, char *why, size_t whylen)
{
	bool msb = elf_getident(elf, NULL)[EI_DATA] == ELFDATA2MSB;
	const unsigned char *p = desc + 8, *end = desc + size;
	unsigned long long version, argc;
	char what[32];
	int i;

	memset(a, 0, sizeof(*a));
	if (size < 8) {
		snprintf(why, whylen, "its description of %zu bytes is shorter than its version and argument count",
			 size);
		return why;
	}
	version = read_word(desc, 4, msb);
	argc = read_word(desc + 4, 4, msb);
	if (version != USDT_PK_NOTE_VERSION) {
		snprintf(why, whylen, "its version is %llu, not %d (the one this probekit reads)", version,
			 USDT_PK_NOTE_VERSION);
		return why;
	}
	if (argc > USDT_ARGC_MAX) {
		snprintf(why, whylen, "its argument count %llu is more than %d", argc, USDT_ARGC_MAX);
		return why;
	}
	if (take_field(&p, end, "provider", a->provider, sizeof(a->provider), false, why, whylen) ||
	    take_field(&p, end, "probe name", a->name, sizeof(a->name), false, why, whylen))
		return why;
	for (i = 0; i < (int)argc; i++) {
		snprintf(what, sizeof(what), "argument %d's type", i);
		if (take_field(&p, end, what, a->args[i].type, sizeof(a->args[i].type), true, why, whylen))
			return why;
		snprintf(what, sizeof(what), "argument %d's name", i);
		if (take_field(&p, end, what, a->args[i].name, sizeof(a->args[i].name), false, why,
			       whylen))
			return why;
	}
	a->argc = (int)argc;
	if (p != end) {
		snprintf(why, whylen, "its description has %zu bytes past its last string", (size_t)(end - p));
		return why;
	}
	return NULL;
}

const struct usdt_probe_args *usdt_probe_args_find(const struct usdt_probe_args *a, size_t n,
						   const char *provider, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(a[i].provider, provider) && !strcmp(a[i].name, name))
			return &a[i];
	return NULL;
}

bool usdt_type_is_string(const char *type)
{
	return strstr(type, "char") && strchr(type, '*');
}

/* Append the probekit notes of one SHT_NOTE section to *out, walked as
 * read_section walks .note.stapsdt (notes.py's _walk is the twin). */
static int read_pk_section(Elf *elf, Elf_Scn *scn, struct usdt_probe_args **out, size_t *n,
			   size_t *cap, char *err, size_t errlen)
{
	Elf_Data *data = elf_rawdata(scn, NULL);
	bool msb = elf_getident(elf, NULL)[EI_DATA] == ELFDATA2MSB;
	const struct usdt_probe_args *seen;
	const unsigned char *d;
	size_t off = 0, size, align, name_at, desc_at;
	unsigned long long namesz, descsz, type;
	char why[256];
	const char *cause;
	GElf_Shdr sh;

	if (!data || !gelf_getshdr(scn, &sh))
		return fail(err, errlen, "cannot read its %s section (%s)", USDT_PK_NOTE_SECTION,
			    elf_errmsg(-1));
	d = data->d_buf;
	size = data->d_size;
	align = sh.sh_addralign == 8 ? 8 : 4;
	while (off < size) {
		if (size - off < 12) {
			cause = "its 12-byte header runs past the end of " USDT_PK_NOTE_SECTION;
			goto bad;
		}
		namesz = read_word(d + off, 4, msb);
		descsz = read_word(d + off + 4, 4, msb);
		type = read_word(d + off + 8, 4, msb);
		name_at = off + 12;
		desc_at = name_at + align_up((size_t)namesz, align);
		if (desc_at > size || descsz > size - desc_at) {
			snprintf(why, sizeof(why), "its name (%llu bytes) and description (%llu bytes) run past the end of %s",
				 namesz, descsz, USDT_PK_NOTE_SECTION);
			cause = why;
			goto bad;
		}
		if (type == USDT_PK_NOTE_TYPE && namesz == sizeof(USDT_PK_NOTE_OWNER) &&
		    !memcmp(d + name_at, USDT_PK_NOTE_OWNER, sizeof(USDT_PK_NOTE_OWNER))) {
			if (*n == USDT_PK_NOTES_MAX)
				return fail(err, errlen, "more than %d probekit notes", USDT_PK_NOTES_MAX);
			if (*n == *cap) {
				size_t ncap = *cap ? *cap * 2 : 32;
				struct usdt_probe_args *grown = realloc(*out, ncap * sizeof(**out));

				if (!grown)
					return fail(err, errlen, "out of memory");
				*out = grown;
				*cap = ncap;
			}
			cause = parse_pk_note(elf, d + desc_at, (size_t)descsz, *out + *n, why, sizeof(why));
			if (cause)
				goto bad;
			seen = usdt_probe_args_find(*out, *n, (*out)[*n].provider, (*out)[*n].name);
			if (!seen)
				(*n)++;
			else if (memcmp(seen, *out + *n, sizeof(*seen)))
				return fail(err, errlen, "two probekit notes of %s:%s disagree about its arguments",
					    seen->provider, seen->name);
		}
		off = desc_at + align_up((size_t)descsz, align);
	}
	return 0;
bad:
	return fail(err, errlen, "the probekit note at file offset 0x%llx is corrupt: %s",
		    (unsigned long long)sh.sh_offset + off, cause);
}

int usdt_probe_args_read_elf(Elf *elf, unsigned long long file_size,
			     struct usdt_probe_args **out, size_t *n, char *err, size_t errlen)
{
	size_t shstrndx, cap = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	const char *name;

	*out = NULL;
	*n = 0;
	if (usdt_elf_check(elf, file_size, err, errlen))
		return -1;
	if (elf_getshdrstrndx(elf, &shstrndx))
		return fail(err, errlen, "corrupt ELF header (%s)", elf_errmsg(-1));
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, USDT_PK_NOTE_SECTION))
			continue;
		if (read_pk_section(elf, scn, out, n, &cap, err, errlen)) {
			free(*out);
			*out = NULL;
			*n = 0;
			return -1;
		}
		break;
	}
	return 0;
}

int usdt_notes_read_elf(Elf *elf, unsigned long long file_size,
			struct usdt_note **out, size_t *n, char *err, size_t errlen)
{
	size_t shstrndx, cap = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	bool have_base = false;
	unsigned long long base_addr = 0;
	const char *name;

	*out = NULL;
	*n = 0;
	if (usdt_elf_check(elf, file_size, err, errlen))
		return -1;
	if (gelf_getclass(elf) == ELFCLASSNONE || elf_getshdrstrndx(elf, &shstrndx))
		return fail(err, errlen, "corrupt ELF header (%s)", elf_errmsg(-1));
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			return fail(err, errlen, "corrupt section header (%s)", elf_errmsg(-1));
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".stapsdt.base")) {
			have_base = true;
			base_addr = sh.sh_addr;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".note.stapsdt"))
			continue;
		if (read_section(elf, scn, have_base, base_addr, out, n, &cap, err, errlen)) {
			free(*out);
			*out = NULL;
			*n = 0;
			return -1;
		}
	}
	return 0;
}

/* What st_mode is, when it is not a regular file. */
static const char *file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a file";
}

static int not_regular(mode_t mode, char *err, size_t errlen)
{
	fail(err, errlen, "is %s, not a regular file", file_kind(mode));
	return USDT_NOT_REGULAR;
}

int usdt_open_regular(const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd, e;

	/* O_NONBLOCK: opening a FIFO with no writer returns at once, so that
	 * fstat can say what it is.  A socket cannot be opened (ENXIO): stat
	 * says what it is. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENXIO && !stat(path, &st) && !S_ISREG(st.st_mode))
			return not_regular(st.st_mode, err, errlen);
		return fail(err, errlen, "%s", strerror(e));
	}
	if (fstat(fd, &st)) {
		e = errno;
		close(fd);
		return fail(err, errlen, "%s", strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return not_regular(st.st_mode, err, errlen);
	}
	if (fcntl(fd, F_SETFL, 0)) {
		e = errno;
		close(fd);
		return fail(err, errlen, "%s", strerror(e));
	}
	return fd;
}

const char *usdt_escape(const char *s, char *out, size_t cap)
{
	size_t o = 0;
	char piece[5];
	const char *add;
	unsigned char c;

	if (!cap)
		return out;
	for (; *s; s++) {
		c = (unsigned char)*s;
		if (c == '\n')
			add = "\\n";
		else if (c == '\r')
			add = "\\r";
		else if (c == '\t')
			add = "\\t";
		else if (c < 0x20 || c == 0x7f)
			add = (snprintf(piece, sizeof(piece), "\\x%02x", c), piece);
		else
			add = (piece[0] = (char)c, piece[1] = '\0', piece);
		if (o + strlen(add) >= cap)
			break;
		memcpy(out + o, add, strlen(add));
		o += strlen(add);
	}
	out[o] = '\0';
	return out;
}

/* What read_path reads from an open ELF file: the stapsdt notes or the
 * probekit notes. */
typedef int (*elf_reader)(Elf *elf, unsigned long long file_size, void *out, size_t *n, char *err,
			  size_t errlen);

static int read_stapsdt(Elf *elf, unsigned long long file_size, void *out, size_t *n, char *err,
			size_t errlen)
{
	return usdt_notes_read_elf(elf, file_size, out, n, err, errlen);
}

static int read_pk(Elf *elf, unsigned long long file_size, void *out, size_t *n, char *err,
		   size_t errlen)
{
	return usdt_probe_args_read_elf(elf, file_size, out, n, err, errlen);
}

/* Open path as usdt_notes_read says and run read on it; every error is
 * "PATH: why". */
static int read_path(const char *path, elf_reader read, void **out, size_t *n, char *err,
		     size_t errlen)
{
	Elf *elf;
	int fd, rc;
	struct stat st;
	char why[256], shown[USDT_PATH_SHOWN];

	*out = NULL;
	*n = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return fail(err, errlen, "libelf is too old (%s)", elf_errmsg(-1));
	usdt_escape(path, shown, sizeof(shown));
	fd = usdt_open_regular(path, why, sizeof(why));
	if (fd < 0)
		return fail(err, errlen, "%s: %s", shown, why);
	if (fstat(fd, &st)) {
		rc = fail(err, errlen, "%s: %s", shown, strerror(errno));
		close(fd);
		return rc;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		/* libelf refuses some broken files at once: say why as elf.py
		 * does, from the raw bytes (mapped, not read: nothing the file
		 * claims is allocated). */
		const char *lib = elf_errmsg(-1);
		void *m = st.st_size > 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
					 : MAP_FAILED;

		if (m != MAP_FAILED && raw_check(m, (unsigned long long)st.st_size, why, sizeof(why)))
			rc = fail(err, errlen, "%s: %s", shown, why);
		else
			rc = fail(err, errlen, "%s: not a readable ELF file (%s)", shown, lib);
		if (m != MAP_FAILED)
			munmap(m, (size_t)st.st_size);
	} else {
		rc = read(elf, (unsigned long long)st.st_size, out, n, why, sizeof(why));
		if (rc)
			fail(err, errlen, "%s: %s", shown, why);
		elf_end(elf);
	}
	close(fd);
	return rc;
}

int usdt_notes_read(const char *path, struct usdt_note **out, size_t *n,
		    char *err, size_t errlen)
{
	return read_path(path, read_stapsdt, (void **)out, n, err, errlen);
}

int usdt_probe_args_read(const char *path, struct usdt_probe_args **out, size_t *n,
			 char *err, size_t errlen)
{
	return read_path(path, read_pk, (void **)out, n, err, errlen);
}

void usdt_notes_free(struct usdt_note *notes)
{
	free(notes);
}

/* --- argument specs -------------------------------------------------------- */

#include "usdt_regs.h"

const struct usdt_reg *usdt_reg_find(int machine, const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(usdt_regs) / sizeof(usdt_regs[0]); i++)
		if (usdt_regs[i].machine == machine && !strcmp(usdt_regs[i].name, name))
			return &usdt_regs[i];
	return NULL;
}

/* A register name at *p (moved past it) into reg: "%name" on x86_64, a
 * bare name on aarch64; false if none or longer than reg holds. */
static bool take_reg(const char **p, char reg[8], bool percent)
{
	const char *s = *p;
	size_t len = 0;

	if (percent && *s++ != '%')
		return false;
	while ((s[len] >= 'a' && s[len] <= 'z') || (s[len] >= '0' && s[len] <= '9'))
		len++;
	if (len == 0 || len >= 8)
		return false;
	memcpy(reg, s, len);
	reg[len] = '\0';
	*p = s + len;
	return true;
}

/* Whether the displacement op[0, end) is more than a number: it names a
 * symbol ("sym", "40+sym"). */
static bool names_symbol(const char *op, const char *end)
{
	char *num_end;

	if (op == end)
		return false;
	errno = 0;
	(void)strtoll(op, &num_end, 0);
	return num_end != end;
}

/* An x86_64 operand (AT&T syntax) into a. */
static void classify_x86(const char *op, struct usdt_arg *a)
{
	const char *p, *paren = strchr(op, '(');
	char *end, base[8];
	long long v;

	if (op[0] == '$') {
		errno = 0;
		v = strtoll(op + 1, &end, 0);
		if (op[1] && !*end && !errno) {
			a->kind = USDT_ARG_CONST;
			a->val = v;
		}
		return;
	}
	if (op[0] == '%') {
		p = op;
		if (take_reg(&p, a->reg, true) && !*p)
			a->kind = USDT_ARG_REG;
		else
			a->reg[0] = '\0';
		return;
	}
	if (!paren || op[strlen(op) - 1] != ')')
		return;
	/* A symbol in the displacement: the linker's, relative to %rip. */
	if (!strcmp(paren, "(%rip)") && names_symbol(op, paren)) {
		a->kind = USDT_ARG_RIP_SYM;
		strcpy(a->reg, "rip");
		return;
	}
	v = 0;
	if (paren != op) {
		errno = 0;
		v = strtoll(op, &end, 0);
		if (end != paren || errno)
			return;
	}
	p = paren + 1;
	if (!take_reg(&p, base, true))
		return;
	if (!strcmp(p, ")")) {
		a->kind = USDT_ARG_REG_DEREF;
	} else if (*p == ',') {
		a->kind = USDT_ARG_SIB;
		p++;
		if (take_reg(&p, a->index, true))
			a->scale = *p == ',' ? atoi(p + 1) : 1;
	} else {
		return;
	}
	a->val = v;
	memcpy(a->reg, base, sizeof(base));
}

/* A whole number at s, "#" first or not, into *v; false if s is more. */
static bool whole_number(const char *s, long long *v)
{
	char *end;

	if (*s == '#')
		s++;
	if (!*s)
		return false;
	errno = 0;
	*v = strtoll(s, &end, 0);
	return !*end && !errno;
}

static const char *skip_blanks(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* An aarch64 operand (GNU as syntax) into a: a register, an immediate,
 * or [base], [base, disp], [base, index(, lsl N)], [base, #:lo12:sym]. */
static void classify_arm64(const char *op, struct usdt_arg *a)
{
	const char *p = op, *close;
	char base[8], shown[64];
	long long v;
	int shift;

	if (op[0] != '[') {
		if (whole_number(op, &v)) {
			a->kind = USDT_ARG_CONST;
			a->val = v;
		} else if (take_reg(&p, base, false) && !*p &&
			   usdt_reg_find(a->machine, base)) {
			a->kind = USDT_ARG_REG;
			memcpy(a->reg, base, sizeof(base));
		}
		return;
	}
	close = strchr(op, ']');
	p = op + 1;
	if (!close || close[1] || !take_reg(&p, base, false) ||
	    !usdt_reg_find(a->machine, base))
		return;
	p = skip_blanks(p);
	if (*p == ']') {
		a->kind = USDT_ARG_REG_DEREF;
	} else if (*p != ',') {
		return;
	} else if (p = skip_blanks(p + 1), *p == '#' && p[1] == ':') {
		/* #:lo12:sym: the low bits of a symbol's address, the base
		 * register holding its page (adrp). */
		a->kind = USDT_ARG_RIP_SYM;
	} else {
		snprintf(shown, sizeof(shown), "%.*s", (int)(close - p), p);
		if (whole_number(shown, &v)) {
			a->kind = USDT_ARG_REG_DEREF;
			a->val = v;
		} else if (take_reg(&p, a->index, false) &&
			   usdt_reg_find(a->machine, a->index)) {
			p = skip_blanks(p);
			shift = 0;
			if (*p == ',' && (sscanf(skip_blanks(p + 1), "lsl %d", &shift) != 1 ||
					  shift < 0 || shift > 3))
				return;
			a->kind = USDT_ARG_SIB;
			a->scale = 1 << shift;
		} else {
			a->index[0] = '\0';
			return;
		}
	}
	memcpy(a->reg, base, sizeof(base));
}

/* The end of the spec item at p: the first blank outside brackets. */
static const char *item_end(const char *p)
{
	int depth = 0;

	for (; *p && (depth || (*p != ' ' && *p != '\t')); p++)
		if (*p == '[')
			depth++;
		else if (*p == ']' && depth)
			depth--;
	return p;
}

int usdt_args_parse(const char *spec, int machine, struct usdt_arg *out,
		    int max, char *err, size_t errlen)
{
	const char *p = spec, *start, *at;
	int count = 0, size;
	size_t len;
	char *end;
	long n;

	for (;;) {
		p = skip_blanks(p);
		if (!*p)
			return count;
		start = p;
		p = item_end(p);
		len = (size_t)(p - start);
		if (count == max || count == USDT_ARGC_MAX)
			return fail(err, errlen, "more than %d arguments in spec", count);
		if (len >= sizeof(out->text))
			return fail(err, errlen, "argument %d is longer than %zu bytes",
				    count, sizeof(out->text) - 1);
		memset(&out[count], 0, sizeof(out[count]));
		memcpy(out[count].text, start, len);
		at = memchr(start, '@', len);
		errno = 0;
		n = strtol(start, &end, 10);
		if (!at || end != at || at + 1 == p)
			return fail(err, errlen, "argument %d '%s' is not SIZE@OPERAND",
				    count, out[count].text);
		size = (int)(n < 0 ? -n : n);
		if (size != 1 && size != 2 && size != 4 && size != 8)
			return fail(err, errlen, "argument %d '%s': size must be 1, 2, 4 or 8",
				    count, out[count].text);
		out[count].size = size;
		out[count].is_signed = n < 0;
		out[count].machine = machine;
		out[count].kind = USDT_ARG_OTHER;
		if (machine == EM_AARCH64)
			classify_arm64(out[count].text + (at + 1 - start), &out[count]);
		else if (machine == EM_X86_64)
			classify_x86(out[count].text + (at + 1 - start), &out[count]);
		count++;
	}
}

/* Whether register name of a's machine is one the three readers parse
 * and hold a value in. */
static bool parsed_reg(const struct usdt_arg *a, const char *name)
{
	const struct usdt_reg *r = usdt_reg_find(a->machine, name);

	return r && r->parsed && !r->pc;
}

static bool readable_reg(const struct usdt_arg *a)
{
	return (a->kind == USDT_ARG_REG || a->kind == USDT_ARG_REG_DEREF) &&
	       parsed_reg(a, a->reg);
}

/* Whether s[0, end) (end NULL: to the NUL) is a decimal number, as
 * libbpf 1.1 reads one (%ld): no '#', '$' or 0x. */
static bool decimal(const char *s, const char *end)
{
	size_t len = end ? (size_t)(end - s) : strlen(s);

	if (len && *s == '-')
		s++, len--;
	return len && strspn(s, "0123456789") >= len;
}

bool usdt_arg_readable_bpftrace(const struct usdt_arg *a)
{
	/* On aarch64 it reads through BCC's parser, which takes [base,
	 * index] without a shift, as it reads a [base, disp], and no '#'. */
	if (a->machine == EM_AARCH64 && strchr(a->text, '#'))
		return false;
	if (a->machine == EM_AARCH64 && a->kind == USDT_ARG_SIB)
		return a->scale == 1 && parsed_reg(a, a->reg) &&
		       parsed_reg(a, a->index);
	return readable_reg(a);
}

bool usdt_arg_readable_libbpf(const struct usdt_arg *a)
{
	const char *op = strchr(a->text, '@') + 1, *comma;

	if (a->machine == EM_AARCH64) {
		if (a->kind == USDT_ARG_CONST)
			return decimal(op, NULL);
		comma = strchr(op, ',');
		return readable_reg(a) &&
		       (!comma || decimal(skip_blanks(comma + 1), strchr(op, ']')));
	}
	if (a->kind != USDT_ARG_CONST)
		return readable_reg(a);
	/* libbpf 1.1 reads a constant with %lld: decimal only. */
	return decimal(op + 1, NULL);
}

size_t usdt_distance(const char *a, const char *b)
{
	size_t row[USDT_DISTANCE_MAX + 1], nb = strlen(b), i, k, diag, up;

	if (nb > USDT_DISTANCE_MAX)
		return SIZE_MAX;
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
