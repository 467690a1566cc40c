/* SPDX-License-Identifier: BSD-2-Clause */
/* probekit's one C reader of systemtap USDT notes (.note.stapsdt) and of
 * their argument specs, through libelf.  The Python twin is
 * probes/probelib/notes.py and argspec.py; tests/probes/test_readers.py holds both
 * to the same fixtures.
 *
 * Every length read from the file is bounded: a note whose strings do not
 * fit the fields below, or do not end inside the note, or hold a byte no
 * probe name has (a control character), makes the read fail with one line
 * that names the note's file offset and the cause, word for word what
 * notes.py says; so does a truncated or corrupt file.  A corrupt note is
 * an error, not skipped: the probes around it cannot be trusted either. */
#ifndef PROBEKIT_USDT_NOTES_H
#define PROBEKIT_USDT_NOTES_H

#include <stdbool.h>
#include <stddef.h>

#define USDT_NAME_MAX 128
#define USDT_SPEC_MAX 512
#define USDT_ARGC_MAX 12
/* More notes than any real binary holds (libjvm has about 900). */
#define USDT_NOTES_MAX 65536

/* Operand kinds, as x86_64 (AT&T) and aarch64 write them. */
enum usdt_arg_kind {
	USDT_ARG_CONST,		/* $N; aarch64 N or #N */
	USDT_ARG_REG,		/* %reg; aarch64 xN, wN, sp */
	USDT_ARG_REG_DEREF,	/* disp(%reg); aarch64 [reg], [reg, disp] */
	USDT_ARG_RIP_SYM,	/* symbol-relative: sym(%rip), sym+N(%rip);
				 * aarch64 [reg, #:lo12:sym] */
	USDT_ARG_SIB,		/* disp(%base,%index[,scale]); aarch64 [base,
				 * index] and [base, index, lsl N] */
	USDT_ARG_OTHER,
};

struct usdt_arg {
	enum usdt_arg_kind kind;
	int machine;		/* the ELF file's e_machine (EM_X86_64, EM_AARCH64) */
	int size;		/* bytes, 1/2/4/8 */
	bool is_signed;
	long long val;		/* constant, or the displacement of a deref */
	char reg[8];		/* "rax", "x19", "sp" ... ("" for CONST) */
	char index[8];		/* SIB: the index register */
	int scale;		/* SIB: its multiplier */
	char text[64];		/* the item as written, e.g. "-4@40+CheckpointStats(%rip)" */
};

/* One name of a register, from probekit's one register table
 * (probes/usdt/registers, through probes/usdt/genregs). */
struct usdt_reg {
	const char *name;	/* as an operand writes it: "eax", "x3" */
	const char *field;	/* its struct pt_regs member: "ax", "regs[3]" */
	unsigned short machine;	/* e_machine */
	unsigned char size;	/* bytes the name reads */
	bool pc;		/* the program counter: the probe's address at a
				 * uprobe, not what the compiler meant */
	bool parsed;		/* bpftrace 0.17, BCC 0.26, libbpf 1.1 parse it */
	unsigned short off;	/* byte offset of field in struct pt_regs */
};

/* The register machine calls name, or NULL. */
const struct usdt_reg *usdt_reg_find(int machine, const char *name);

struct usdt_note {
	char provider[USDT_NAME_MAX];
	char name[USDT_NAME_MAX];
	unsigned long long pc;		/* site address (after the .stapsdt.base adjustment) */
	unsigned long long pc_off;	/* its file offset: where a uprobe attaches (0: none) */
	unsigned long long sema;	/* semaphore address, 0 when the probe has none */
	unsigned long long sema_off;	/* its file offset: the uprobe's ref_ctr_offset */
	char spec[USDT_SPEC_MAX];	/* the argument spec text */
	int machine;			/* the file's e_machine: how to read spec */
};

/* Open path for reading when it is a regular file (or a link to one): the
 * fd; or -1 when it cannot be opened, with strerror in err; or
 * USDT_NOT_REGULAR with the reason ("is a FIFO, not a regular file").  Every path a user gives a probekit C command is opened here,
 * so that a FIFO, device, directory or socket is refused at once rather
 * than blocking in open() or read().  The Python twin is
 * probes/probelib/inputs.py's open_regular, worded alike. */
#define USDT_NOT_REGULAR (-2)
int usdt_open_regular(const char *path, char *err, size_t errlen);

/* s into out (cap bytes, truncated to fit) with each control character
 * escaped (\n, \r, \t, else \xNN), so that a name or path echoed in a
 * message keeps it one line; out.  inputs.py's one_line is the twin. */
const char *usdt_escape(const char *s, char *out, size_t cap);
/* Room for an escaped path in a message: PATH_MAX bytes of it. */
#define USDT_PATH_SHOWN 4096

/* Every stapsdt note of the ELF file at path, in file order.  0 and a
 * malloc'd array (free with usdt_notes_free; NULL when *n is 0), or -1 with
 * a one-line reason in err. */
int usdt_notes_read(const char *path, struct usdt_note **out, size_t *n,
		    char *err, size_t errlen);
void usdt_notes_free(struct usdt_note *notes);
/* The same from an ELF handle the caller opened on a file of file_size
 * bytes (for a reader that also reads other sections: one open). */
struct Elf;
int usdt_notes_read_elf(struct Elf *elf, unsigned long long file_size,
			struct usdt_note **out, size_t *n, char *err, size_t errlen);

/* probekit's own note: each probe's argument C types and names, which a
 * stapsdt note does not carry.  probekit-gencatalog's USDT=1 header puts one
 * note per probe in section .note.probekit (allocated: strip keeps it),
 * owner "probekit", type USDT_PK_NOTE_TYPE; the description, in the file's
 * byte order: a 4-byte version (USDT_PK_NOTE_VERSION), a 4-byte argument
 * count, then NUL-terminated strings: provider, probe name, and each
 * argument's type and name (doc/probes-in-your-code.md).  probelib's
 * notes.py (read_arg_names) is the Python twin, held to the same answers
 * and messages by tests/probes/test_readers.py. */
#define USDT_PK_NOTE_SECTION ".note.probekit"
#define USDT_PK_NOTE_OWNER "probekit"
#define USDT_PK_NOTE_TYPE 1
#define USDT_PK_NOTE_VERSION 1
/* One note per probe: more than any real binary declares. */
#define USDT_PK_NOTES_MAX 4096
#define USDT_TYPE_MAX 64

struct usdt_arg_name {
	char type[USDT_TYPE_MAX];	/* "uint64_t", "char *" */
	char name[USDT_NAME_MAX];	/* "id" */
};

struct usdt_probe_args {
	char provider[USDT_NAME_MAX];
	char name[USDT_NAME_MAX];
	int argc;
	struct usdt_arg_name args[USDT_ARGC_MAX];
};

/* The probekit notes of the ELF file at path, in file order, one per
 * probe: 0 and a malloc'd array (free with free(); NULL when *n is 0, as
 * for a binary built without probekit's header), or -1 with a one-line
 * reason in err (a corrupt file or note, or two notes of one probe that
 * disagree). */
int usdt_probe_args_read(const char *path, struct usdt_probe_args **out, size_t *n,
			 char *err, size_t errlen);
int usdt_probe_args_read_elf(struct Elf *elf, unsigned long long file_size,
			     struct usdt_probe_args **out, size_t *n, char *err, size_t errlen);
/* The entry of provider:name in what usdt_probe_args_read gave, or NULL. */
const struct usdt_probe_args *usdt_probe_args_find(const struct usdt_probe_args *a, size_t n,
						   const char *provider, const char *name);

/* The longest name usdt_distance() measures against. */
#define USDT_DISTANCE_MAX 1024

/* The edit distance (insert, delete, replace) between a and b, or
 * SIZE_MAX when b is longer than USDT_DISTANCE_MAX bytes: what "nearest"
 * means for a probe and for an argument's name, in every tool that
 * suggests one. */
size_t usdt_distance(const char *a, const char *b);

/* Whether an argument of C type type (as a probekit note gives it) is a
 * string a reader may read with str(): a char pointer. */
bool usdt_type_is_string(const char *type);

/* Parse a spec of an ELF file for machine (its e_machine) into at most
 * max args: the count, or -1 with a reason in err.  Items are separated by
 * blanks outside brackets (aarch64's "-4@[sp, 12]" is one). */
int usdt_args_parse(const char *spec, int machine, struct usdt_arg *out,
		    int max, char *err, size_t errlen);

/* Whether a reader can use an operand.  x86_64: bpftrace 0.17 reads REG
 * and REG_DEREF (not immediates); libbpf 1.1 reads CONST (decimal), REG
 * and REG_DEREF; neither reads RIP_SYM or SIB.  aarch64 (their sources):
 * libbpf 1.1 reads N, xN/sp and [xN(, N)]; bpftrace 0.17, through BCC's
 * parser, also [xN, xM] and not immediates, as on x86_64.  Only the
 * register names the table marks parsed count, never the pc. */
bool usdt_arg_readable_bpftrace(const struct usdt_arg *a);
bool usdt_arg_readable_libbpf(const struct usdt_arg *a);

/* Whether elf, read from a file of file_size bytes, is an ELF file whose
 * headers and sections all lie inside it: 0, or -1 with a reason in err.
 * usdt_notes_read checks it; a reader of other sections should too. */
int usdt_elf_check(struct Elf *elf, unsigned long long file_size,
		   char *err, size_t errlen);

/* The file offset of virtual address addr, from the PT_LOAD segment that
 * maps it from the file: 0 and the offset in *off, or -1 when no segment
 * does (an address in .bss has none). */
int usdt_file_offset(struct Elf *elf, unsigned long long addr,
		     unsigned long long *off);

#endif
