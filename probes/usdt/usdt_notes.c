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

int usdt_elf_check(Elf *elf, unsigned long long file_size, char *err, size_t errlen)
{
	GElf_Ehdr eh;
	GElf_Shdr sh;
	Elf_Scn *scn = NULL;
	size_t nsec, i = 0;

	if (elf_kind(elf) != ELF_K_ELF)
		return fail(err, errlen, "not an ELF file");
	if (!gelf_getehdr(elf, &eh))
		return fail(err, errlen, "truncated or corrupt ELF header (%s)", elf_errmsg(-1));
	if (eh.e_shoff > file_size ||
	    (unsigned long long)eh.e_shnum * eh.e_shentsize > file_size - eh.e_shoff)
		return fail(err, errlen, "truncated: its section headers run past the end of the file (%llu bytes)",
			    file_size);
	if (eh.e_phoff > file_size ||
	    (unsigned long long)eh.e_phnum * eh.e_phentsize > file_size - eh.e_phoff)
		return fail(err, errlen, "truncated: its program headers run past the end of the file (%llu bytes)",
			    file_size);
	if (elf_getshdrnum(elf, &nsec))
		return fail(err, errlen, "corrupt section headers (%s)", elf_errmsg(-1));
	while ((scn = elf_nextscn(elf, scn))) {
		i++;
		if (!gelf_getshdr(scn, &sh))
			return fail(err, errlen, "corrupt section header %zu (%s)", i, elf_errmsg(-1));
		if (sh.sh_type != SHT_NOBITS &&
		    (sh.sh_offset > file_size || sh.sh_size > file_size - sh.sh_offset))
			return fail(err, errlen, "truncated: section %zu runs past the end of the file (%llu bytes)",
				    i, file_size);
	}
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

/* Copy the NUL-terminated string at *p (which must end before end) into
 * dst of cap bytes and move *p past it; -1 when it does not fit or end. */
static int take_string(const char **p, const char *end, char *dst, size_t cap)
{
	const char *nul = memchr(*p, '\0', (size_t)(end - *p));
	size_t len;

	if (!nul)
		return -1;
	len = (size_t)(nul - *p);
	if (len >= cap)
		return -1;
	memcpy(dst, *p, len + 1);
	*p = nul + 1;
	return 0;
}

/* One note's description into *note. */
static int parse_note(Elf *elf, const unsigned char *desc, size_t size,
		      bool have_base, unsigned long long base_addr,
		      struct usdt_note *note, char *err, size_t errlen)
{
	int word = gelf_getclass(elf) == ELFCLASS64 ? 8 : 4;
	bool msb = elf_getident(elf, NULL)[EI_DATA] == ELFDATA2MSB;
	unsigned long long base;
	const char *p, *end;

	memset(note, 0, sizeof(*note));
	if (size < 3 * (size_t)word)
		return fail(err, errlen, "a stapsdt note of %zu bytes is shorter than its three addresses", size);
	note->pc = read_word(desc, word, msb);
	base = read_word(desc + word, word, msb);
	note->sema = read_word(desc + 2 * word, word, msb);
	if (have_base && base) {
		note->pc += base_addr - base;
		if (note->sema)
			note->sema += base_addr - base;
	}
	p = (const char *)desc + 3 * word;
	end = (const char *)desc + size;
	if (take_string(&p, end, note->provider, sizeof(note->provider)) ||
	    take_string(&p, end, note->name, sizeof(note->name)))
		return fail(err, errlen, "a stapsdt note's provider or name is unterminated or longer than %d bytes",
			    USDT_NAME_MAX - 1);
	if (take_string(&p, end, note->spec, sizeof(note->spec)))
		return fail(err, errlen, "the argument spec of probe %s:%s is unterminated or longer than %d bytes",
			    note->provider, note->name, USDT_SPEC_MAX - 1);
	if (usdt_file_offset(elf, note->pc, &note->pc_off))
		note->pc_off = 0;
	if (!note->sema || usdt_file_offset(elf, note->sema, &note->sema_off))
		note->sema_off = 0;
	return 0;
}

/* Append the notes of one SHT_NOTE section to *out. */
static int read_section(Elf *elf, Elf_Scn *scn, bool have_base,
			unsigned long long base_addr, struct usdt_note **out,
			size_t *n, size_t *cap, char *err, size_t errlen)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	if (!data)
		return fail(err, errlen, "cannot read its .note.stapsdt section (%s)", elf_errmsg(-1));
	while (off < data->d_size &&
	       (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		off = next;
		if (nh.n_type != NT_STAPSDT || nh.n_namesz != sizeof("stapsdt") ||
		    memcmp((char *)data->d_buf + name_off, "stapsdt", sizeof("stapsdt")))
			continue;
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
		if (parse_note(elf, (unsigned char *)data->d_buf + desc_off, nh.n_descsz,
			       have_base, base_addr, *out + *n, err, errlen))
			return -1;
		(*n)++;
	}
	if (off < data->d_size)
		return fail(err, errlen, "its .note.stapsdt section is truncated or corrupt");
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

int usdt_notes_read(const char *path, struct usdt_note **out, size_t *n,
		    char *err, size_t errlen)
{
	Elf *elf;
	int fd, rc;
	struct stat st;

	*out = NULL;
	*n = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return fail(err, errlen, "libelf is too old (%s)", elf_errmsg(-1));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		rc = fail(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		rc = fail(err, errlen, "%s: not a readable ELF file (%s)", path, elf_errmsg(-1));
	} else {
		char why[256];

		rc = usdt_notes_read_elf(elf, (unsigned long long)st.st_size, out, n, why, sizeof(why));
		if (rc)
			fail(err, errlen, "%s: %s", path, why);
		elf_end(elf);
	}
	close(fd);
	return rc;
}

void usdt_notes_free(struct usdt_note *notes)
{
	free(notes);
}

/* --- argument specs -------------------------------------------------------- */

/* General-purpose registers in every width, as sys/sdt.h writes them. */
static bool is_gpr(const char *r)
{
	static const char *const regs[] = {
		"rax", "eax", "ax", "al", "rbx", "ebx", "bx", "bl",
		"rcx", "ecx", "cx", "cl", "rdx", "edx", "dx", "dl",
		"rsi", "esi", "si", "sil", "rdi", "edi", "di", "dil",
		"rbp", "ebp", "bp", "bpl", "rsp", "esp", "sp", "spl",
	};
	size_t i;
	char *end;
	long n;

	for (i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		if (!strcmp(r, regs[i]))
			return true;
	if (r[0] != 'r' || r[1] < '0' || r[1] > '9')
		return false;
	n = strtol(r + 1, &end, 10);
	return n >= 8 && n <= 15 &&
	       (!*end || (end[1] == '\0' && (*end == 'd' || *end == 'w' || *end == 'b')));
}

/* A register name "%name" at *p (moved past it) into reg; false if none or
 * longer than reg holds. */
static bool take_reg(const char **p, char reg[8])
{
	const char *s = *p;
	size_t len = 0;

	if (*s != '%')
		return false;
	s++;
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

static void classify(const char *op, struct usdt_arg *a)
{
	const char *p, *paren = strchr(op, '(');
	char *end, base[8];
	long long v;

	a->kind = USDT_ARG_OTHER;
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
		if (take_reg(&p, a->reg) && !*p)
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
	if (!take_reg(&p, base))
		return;
	if (!strcmp(p, ")")) {
		a->kind = USDT_ARG_REG_DEREF;
	} else if (*p == ',') {
		a->kind = USDT_ARG_SIB;
	} else {
		return;
	}
	a->val = v;
	memcpy(a->reg, base, sizeof(base));
}

int usdt_args_parse(const char *spec, struct usdt_arg *out, int max,
		    char *err, size_t errlen)
{
	const char *p = spec, *start, *at;
	int count = 0, size;
	size_t len;
	char *end;
	long n;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			return count;
		start = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
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
		classify(out[count].text + (at + 1 - start), &out[count]);
		count++;
	}
}

static bool readable_reg(const struct usdt_arg *a)
{
	return (a->kind == USDT_ARG_REG || a->kind == USDT_ARG_REG_DEREF) &&
	       is_gpr(a->reg);
}

bool usdt_arg_readable_bpftrace(const struct usdt_arg *a)
{
	return readable_reg(a);
}

bool usdt_arg_readable_libbpf(const struct usdt_arg *a)
{
	const char *op;

	if (a->kind != USDT_ARG_CONST)
		return readable_reg(a);
	/* libbpf 1.1 reads a constant with %lld: decimal only. */
	op = strchr(a->text, '@') + 2;
	if (*op == '-')
		op++;
	return *op && strspn(op, "0123456789") == strlen(op);
}
