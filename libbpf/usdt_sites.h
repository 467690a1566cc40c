// SPDX-License-Identifier: BSD-2-Clause
/*
 * usdt_sites.h: the USDT probes of any target, for the generic tools
 * (usdtlat, usdtcount): the binaries a target runs, their probe sites as
 * the one note reader (probes/usdt/usdt_notes.h) reads them, the
 * argument operands a BPF program can read there, and one plain uprobe
 * per site.
 *
 * Why plain uprobes and not bpf_program__attach_usdt(): libbpf 1.1 refuses
 * a whole probe when one of its operands is one its parser lacks
 * (PostgreSQL's "-4@40+CheckpointStats(%rip)"), though counting and
 * pairing by thread read no argument.  Each uprobe carries the site's
 * semaphore as its ref_ctr_offset, so the kernel raises the semaphore in
 * every process it attaches to, and lowers it when the tool's links
 * close, however the tool ends.
 */
#ifndef PROBEKIT_USDT_SITES_H
#define PROBEKIT_USDT_SITES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "usdt_notes.h"
#include "usdt_site.h"
#include "tool_target.h"

#define USDT_BINS_MAX 1024	/* binaries of one target: exe and libraries */
#define USDT_PROBE_MAX (2 * USDT_NAME_MAX + 2)	/* "provider:name" */

struct usdt_bin {
	char path[PATH_MAX];	/* as this tool opens it (/proc/PID/root/...) */
	char shown[PATH_MAX];	/* as the target names it, for messages */
	struct usdt_note *notes;
	size_t n;
	int fd;			/* > 0: a followed file, path its
				 * /proc/self/fd/N, closed with the sites */
	/* Its probekit notes (each probe's argument names and C types),
	 * read when an option first needs them: usdt_arg_resolve(). */
	struct usdt_probe_args *names;
	size_t nnames;
	int names_read;		/* 0: not yet; 1: read; -1: unreadable */
};

/* A site to attach at, queued until usdt_sites_commit(). */
struct usdt_pending {
	struct bpf_program *prog;
	size_t bin;
	const struct usdt_note *note;
	__u64 cookie;
};

struct usdt_sites {
	struct usdt_bin *bins;	/* the executable first, then libraries */
	size_t nbins;
	/* The first bin a tool's attach walks: 0, then, after a follow
	 * (usdt_watch_replaced()), the replacement's, so that only its
	 * sites are attached again. */
	size_t first;
	size_t ncommitted;	/* pending sites attached so far */
	bool multi;		/* the kernel has multi-uprobe links */
	struct usdt_pending *pending;
	size_t npending;
	struct bpf_link **links;	/* one per site, without multi */
	size_t nlinks;
	int *fds;		/* multi-uprobe links: one per program and file */
	size_t nfds;
};

/*
 * The binaries of t and their notes: for a PID its executable and every
 * file it maps executable, each read through /proc/PID/root so that a
 * library only in the process's mount namespace is found; for -b, the
 * file itself.  0, or one line and -errno.
 */
int usdt_sites_open(struct usdt_sites *s, const struct target *t);

/* Destroy the links (detaching every uprobe) and free the notes. */
void usdt_sites_close(struct usdt_sites *s);

/* Destroy the links only: the notes stay for printing names (--max-rate
 * detaches before it prints).  A void * for common_args.detach. */
void usdt_sites_detach(void *sites);

/* "provider:name" of a note. */
void usdt_probe_name(const struct usdt_note *n, char *out, size_t len);

/*
 * Describe argument argn (1-based, as BCC counts) of note n of b for
 * usdt_site_arg() in BPF.  0, or one line ("... cannot read ...") and
 * -EINVAL when the probe has no such argument or libbpf 1.1's reader
 * could not read its operand either.  The operand is read as the note's
 * file's machine writes it (x86_64 or aarch64), its register located in
 * struct pt_regs by probekit's one register table.
 */
int usdt_site_arg_of(const struct usdt_bin *b, const struct usdt_note *n,
		     int argn, struct usdt_site_arg *out);

/* The same, with that line in why (whylen bytes) instead of printed:
 * for a caller that adds what to do instead (the exporter's "pair by
 * tid"). */
int usdt_site_arg_why(const struct usdt_bin *b, const struct usdt_note *n,
		      int argn, struct usdt_site_arg *out, char *why,
		      size_t whylen);

/* usdt_site_arg_of() for an argument read as a string (usdtcount -S):
 * also one line and -EINVAL when it cannot be a pointer. */
int usdt_site_str_arg_of(const struct usdt_bin *b, const struct usdt_note *n,
			 int argn, struct usdt_site_arg *out);

/*
 * Before the skeleton is loaded: make prog attachable by a multi-uprobe
 * link when the kernel has them (Linux 6.6) and filters them by process
 * (a later fix), one link for all of a file's sites.  Attaching is then one system
 * call per file, and detaching waits for the kernel's grace periods once
 * per link, not once per site: PostgreSQL's 72 probes took 20 s to
 * detach one by one.
 */
void usdt_sites_prepare(struct usdt_sites *s, struct bpf_program *prog);

/* Queue prog at note n of b with cookie as its BPF cookie; 0, or one
 * line and -errno. */
int usdt_sites_add(struct usdt_sites *s, struct bpf_program *prog,
		   const struct usdt_bin *b, const struct usdt_note *n,
		   __u64 cookie);

/* Attach every site queued since the last commit, for t's process (every
 * one for -b).  0, or one line and -errno. */
int usdt_sites_commit(struct usdt_sites *s, const struct target *t);

/*
 * -b PATH, followed: a package upgrade or a deploy replaces a file by
 * renaming a new one onto its path (cp tp tp.new && mv tp.new tp), so
 * the inode the uprobes sit on is no longer the one new processes run.
 * An inotify watch on PATH's directory (IN_MOVED_TO, IN_CLOSE_WRITE)
 * makes fd readable when something lands there; the tool's loop polls
 * fd with its other waits, so nothing runs between events and the probes
 * pay nothing.  Symbolic links in PATH are followed when it is looked at
 * again, as an exec would.
 */
#define USDT_WATCH_FILES 16	/* files a follow remembers, newest first */
struct usdt_watch {
	int fd;			/* inotify; -1: not watching (-p, or failed) */
	char name[256];		/* PATH's last component */
	/* The files traced, [0] the one at PATH last: device, inode. */
	unsigned long long files[USDT_WATCH_FILES][2];
	int nfiles;
};

/* Watch t's file (-b; nothing for -p): 0; fd -1 and one line when
 * inotify refuses (tracing goes on without the follow). */
int usdt_watch_open(struct usdt_watch *w, const struct target *t);
void usdt_watch_close(struct usdt_watch *w);

/* After fd polled readable: read its events; when a file other than the
 * one traced last is now at t's path, that file opened (its inode then
 * becomes the one traced), else -1. */
int usdt_watch_replaced(struct usdt_watch *w, const struct target *t);

/* Whether any process maps a file w has traced (the one at PATH now or
 * one of the USDT_WATCH_FILES - 1 before it): the exporter's target_up
 * for -b.  It reads every process's maps: for a scrape, not a loop. */
bool usdt_watch_mapped(const struct usdt_watch *w);

/*
 * The replacement (fd, from usdt_watch_replaced(), which s then owns)
 * as a new bin, read and attached through fd, s->first set to it, for
 * the tool to queue its sites from s->first on and commit: 0, or one
 * line (MSG_REPLACED_NO_PROBES's) and -errno, s unchanged, fd closed.
 */
int usdt_sites_follow(struct usdt_sites *s, const struct target *t, int fd);

/* After the tool's attach of a follow: on success the line that says
 * so (MSG_REPLACED_FOLLOWED); on failure, queued sites not committed are
 * forgotten and the old file alone stays traced. */
void usdt_sites_followed(struct usdt_sites *s, const struct target *t,
			 int err);

/*
 * --gate PROVIDER:NAME (specs/common.toml, OPT_GATE: tool_options.c hands
 * it to the tool), for usdtlat and usdtcount: some runtimes fire a
 * probe only while another probe's semaphore is raised (CPython 3.11's
 * function__entry needs python:line's; README.md, "Tracing your own
 * service", lists them).  A gate is attached with prog, a program that
 * counts nothing, so the kernel raises its semaphore as for any site;
 * each of its hits still costs a uprobe trap.
 */
#include "probekit_limits.h"	/* USDT_GATES_MAX: specs/limits.toml */

/* Check and remember one --gate argument: a usage error unless it is a
 * probe name and there is room. */
void usdt_gate_option(const char *arg);

/* The argument an option names (usdtlat -k, usdtcount -H/-S): argN, or
 * the argument's name, resolved per probe (usdt_arg_resolve()). */
struct usdt_arg_ref {
	long n;			/* argN: N, from 1 as BCC counts; 0: by name
				 * (or -k tid: no argument) */
	const char *name;	/* by name; NULL for argN and tid */
	const char *opt;	/* "-S", for a line about it */
	char label[USDT_NAME_MAX];	/* how output names it: the name or
					 * "argN" */
};

/*
 * Parse an option's argument into *out: tid (when tid is taken: n 0 and
 * no name; returns false), argN (N from 1 as BCC counts) or a name (a C
 * identifier), true.  Anything else is a usage error naming the choices;
 * arg0, which a bpftrace user would write, is told that the numbering is
 * BCC's and which name it has here.  The same message as
 * bcc/probekit_bcc_usdt.py's arg_type().
 */
bool usdt_arg_option(const char *opt, const char *arg, bool tid,
		     struct usdt_arg_ref *out);

/* Whether s may name an argument: a C identifier shorter than
 * USDT_NAME_MAX, not argN. */
bool usdt_arg_name_valid(const char *s);

/* N (from 1) of the argument called name at note n of b, from b's
 * probekit notes (read once, on first use); -1 with the line that says
 * why in why: a name the probe lacks (SPEC_ARG_UNKNOWN, with the
 * nearest) or a file without names (SPEC_ARG_NO_NAMES). */
int usdt_arg_index(const struct usdt_bin *b, const struct usdt_note *n,
		   const char *name, char *why, size_t whylen);

/*
 * The argument r names at note n of b, described for usdt_site_arg() in
 * BPF into out (as usdt_site_arg_of(); with string, as
 * usdt_site_str_arg_of(), refused by its C type when b names its
 * arguments: only a char * is a string).  A name is looked up in b's
 * probekit notes, so each probe resolves its own (io__submit's len is
 * its fifth argument, io__done's its fourth).  0, or one line and
 * -EINVAL: a name the probe lacks (with the nearest), a file without
 * names (SPEC_ARG_NO_NAMES), or what usdt_site_arg_of() says.
 */
int usdt_arg_resolve(struct usdt_bin *b, const struct usdt_note *n,
		     const struct usdt_arg_ref *r, bool string,
		     struct usdt_site_arg *out);

/* Queue prog at every site of every --gate probe (with cookie 0): 0, or
 * one line and -errno when one is not there. */
int usdt_sites_gates(struct usdt_sites *s, struct bpf_program *prog,
		     const struct target *t);

/* Whether any --gate was given. */
bool usdt_gates_given(void);

/*
 * An interval's empty result, empty ("0 pairs"), into buf (len bytes),
 * with its likely cause when one of the n probes traced, names[], fires
 * only while another is enabled (toolspec.GATED) and that one is
 * neither traced nor given to --gate: "0 pairs: P fires only with --gate
 * G" (toolspec.empty_gated()).  Returns buf.
 */
const char *usdt_empty_gated(char *buf, size_t len, const char *empty,
			     const char (*names)[USDT_PROBE_MAX], size_t n);

/* usdtlat's empty result, empty, into buf with the cause that START's
 * and DONE's argument arg ("arg5", "len") are read as types[0] and types[1]: "0 pairs:
 * arg5 is 8 bytes unsigned at START, 4 bytes signed at DONE"
 * (toolspec.EMPTY_KEYS).  Returns buf. */
const char *usdt_empty_keys(char *buf, size_t len, const char *empty,
			    const char *arg, const struct usdt_site_arg types[2]);

/* One line for a probe (glob: a pattern) that matched nothing: "no USDT
 * probe [matches] P in WHERE; nearest: Q", Q the probe of t nearest in
 * edit distance, the misspelling it most likely is.  In a follow
 * (s->first > 0), of the replacement's probes, in MSG_REPLACED_NO_PROBES. */
void usdt_sites_missing(const struct usdt_sites *s, const struct target *t,
			const char *pattern, bool glob);

/* Whether note n is one pattern names: "provider:name" with fnmatch
 * wildcards in either half, or a bare name glob, of any provider. */
bool usdt_probe_match(const char *pattern, const struct usdt_note *n);

/* Whether "provider:name" is well formed: both parts 1..USDT_NAME_MAX-1
 * bytes of [A-Za-z0-9_]; with glob, also wildcards, and a bare name. */
bool usdt_probe_valid(const char *probe, bool glob);

#endif
