// SPDX-License-Identifier: BSD-2-Clause
/*
 * usdt_sites.c: see usdt_sites.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <bpf/libbpf.h>

#include "probekit_common.spec.h"
#include "probekit_limits.h"
#include "tool_options.h"
#include "tool_priv.h"
#include "usdt_sites.h"

/* A line of /proc/PID/maps: an address range, perms, offset, device,
 * inode, path (PATH_MAX at most). */
#define MAPS_LINE_MAX (PATH_MAX + 128)

/* Add the binary shown (a path in t's mount namespace) unless present. */
/* Add the binary shown (a path in t's mount namespace) unless present
 * (again: even then, a file that replaced it).  With why, a failure to
 * read the executable's notes is put there instead of printed. */
static int add_bin_why(struct usdt_sites *s, const struct target *t,
		       const char *shown, bool exe, const char *again,
		       char *why, size_t whylen)
{
	struct usdt_bin *b;
	char err[256];
	struct usdt_note *notes;
	size_t n;
	int len;

	for (size_t i = 0; i < s->nbins && !again; i++)
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
	if (again)
		len = snprintf(b->path, sizeof(b->path), "%s", again);
	else if (t->pid > 0)
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
		if (why) {
			size_t pl = strlen(b->path);

			/* The reader names the path it opened (a follow's
			 * descriptor): the line names shown. */
			snprintf(why, whylen, "cannot read its USDT probes: %s",
				 !strncmp(err, b->path, pl) &&
				 !strncmp(err + pl, ": ", 2) ? err + pl + 2 : err);
			return -EINVAL;
		}
		if (!target_exited_during_attach(t))
			tool_err("cannot read the USDT probes of %s: %s", shown,
				 err);
		return -EINVAL;
	}
	b->notes = notes;
	b->n = n;
	s->nbins++;
	return 0;
}

static int add_bin(struct usdt_sites *s, const struct target *t,
		   const char *shown, bool exe)
{
	return add_bin_why(s, t, shown, exe, NULL, NULL, 0);
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
		if (!target_exited_during_attach(t))
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

void usdt_sites_detach(void *sites)
{
	struct usdt_sites *s = sites;

	for (size_t i = 0; i < s->nlinks; i++)
		bpf_link__destroy(s->links[i]);
	for (size_t i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->links);
	free(s->fds);
	s->links = NULL;
	s->fds = NULL;
	s->nlinks = s->nfds = 0;
}

void usdt_sites_close(struct usdt_sites *s)
{
	usdt_sites_detach(s);
	free(s->pending);
	for (size_t i = 0; i < s->nbins; i++) {
		usdt_notes_free(s->bins[i].notes);
		free(s->bins[i].names);
		if (s->bins[i].fd > 0)
			close(s->bins[i].fd);
	}
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

/* Why a reader cannot read an operand of kind k, worded as probelib's
 * argspec.reader_problem() words it, so both tool families say the same. */
static const char *kind_why(const struct usdt_arg *a)
{
	switch (a->kind) {
	case USDT_ARG_CONST:
		return "an immediate (constant) operand";
	case USDT_ARG_RIP_SYM:
		return a->machine == EM_X86_64 ? "a symbol-relative %rip operand"
					       : "a symbol-relative operand";
	case USDT_ARG_SIB:
		return "a scale-index-base operand";
	case USDT_ARG_REG:
	case USDT_ARG_REG_DEREF:
		return "a register name it does not parse";
	default:
		return "an operand it does not parse";
	}
}

int usdt_site_arg_why(const struct usdt_bin *b, const struct usdt_note *n,
		      int argn, struct usdt_site_arg *out, char *why,
		      size_t whylen)
{
	struct usdt_arg args[USDT_ARGC_MAX], *a;
	char probe[USDT_PROBE_MAX], err[256];
	const struct usdt_reg *reg;
	const char *op;
	int argc;

	usdt_probe_name(n, probe, sizeof(probe));
	argc = usdt_args_parse(n->spec, n->machine, args, USDT_ARGC_MAX, err,
			       sizeof(err));
	if (argc < 0) {
		snprintf(why, whylen, "%s in %s: cannot parse its arguments "
			 "\"%.64s\": %s", probe, b->shown, n->spec, err);
		return -EINVAL;
	}
	if (argn > argc) {
		snprintf(why, whylen, "%s has no argument %d (it has %d)", probe,
			 argn, argc);
		return -EINVAL;
	}
	a = &args[argn - 1];
	memset(out, 0, sizeof(*out));
	out->size = a->size;
	out->is_signed = a->is_signed;
	out->val = a->val;
	/* The operand without its size: "40+CheckpointStats(%rip)". */
	op = strchr(a->text, '@');
	op = op ? op + 1 : a->text;
	reg = usdt_reg_find(a->machine, a->reg);
	if ((a->kind == USDT_ARG_REG || a->kind == USDT_ARG_REG_DEREF) &&
	    (!reg || reg->pc)) {
		snprintf(why, whylen, "cannot read arg%d of %s: %s cannot read "
			 "%s: %s%s is not a general register", argn, probe,
			 command_name(), op, a->machine == EM_X86_64 ? "%" : "",
			 a->reg);
		return -EINVAL;
	}
	if (reg)
		out->reg_off = reg->off;
	/* What this tool reads is what libbpf 1.1's own reader reads. */
	if (!usdt_arg_readable_libbpf(a)) {
		snprintf(why, whylen, "cannot read arg%d of %s: %s cannot read "
			 "%s: %s; " OPERAND_FIX " (at 0x%llx in %s)", argn, probe,
			 command_name(), op, kind_why(a), n->pc, b->shown);
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

int usdt_site_arg_of(const struct usdt_bin *b, const struct usdt_note *n,
		     int argn, struct usdt_site_arg *out)
{
	char why[PATH_MAX + 512];
	int err = usdt_site_arg_why(b, n, argn, out, why, sizeof(why));

	if (err)
		tool_err("%s", why);
	return err;
}

int usdt_site_str_arg_of(const struct usdt_bin *b, const struct usdt_note *n,
			 int argn, struct usdt_site_arg *out)
{
	struct usdt_arg args[USDT_ARGC_MAX];
	char probe[USDT_PROBE_MAX], err[256];
	int rc = usdt_site_arg_of(b, n, argn, out);

	if (rc)
		return rc;
	/* probekit-check's rule and words (probes/probelib/target.py, Arg):
	 * without a catalog's type, only an 8-byte unsigned argument may
	 * be a pointer. */
	if (out->size == 8 && !out->is_signed)
		return 0;
	usdt_probe_name(n, probe, sizeof(probe));
	usdt_args_parse(n->spec, n->machine, args, USDT_ARGC_MAX, err,
			sizeof(err));
	tool_err("-S arg%d reads a string, but arg%d of %s is a%s %u-byte %s "
		 "integer (%s), not a pointer", argn, argn, probe,
		 out->size == 8 ? "n" : "", out->size,
		 out->is_signed ? "signed" : "unsigned", args[argn - 1].text);
	return -EINVAL;
}

/* --- attaching ------------------------------------------------------------ */

/* Linux 6.6's multi-uprobe link, which libbpf 1.1 predates: its attach
 * type and BPF_LINK_CREATE's arguments for it, as the kernel's UAPI
 * (union bpf_attr) lays them out. */
#define PK_BPF_TRACE_UPROBE_MULTI 48
struct pk_uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 multi_flags;
	__u32 pid;
	__u32 pad;
};

static int uprobe_multi_create(int prog_fd, const char *path,
			       const __u64 *offsets, const __u64 *ref_ctr,
			       const __u64 *cookies, __u32 cnt, __u32 pid)
{
	struct pk_uprobe_multi_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_fd = prog_fd;
	a.attach_type = PK_BPF_TRACE_UPROBE_MULTI;
	a.path = (__u64)(unsigned long)path;
	a.offsets = (__u64)(unsigned long)offsets;
	a.ref_ctr_offsets = (__u64)(unsigned long)ref_ctr;
	a.cookies = (__u64)(unsigned long)cookies;
	a.cnt = cnt;
	a.pid = pid;
	return syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
}

/*
 * Whether multi-uprobe links work, and filter by process: a link on the
 * directory "/" fails with EBADF where they exist, and one for PID -1
 * with EINVAL only once the PID filter was fixed to filter by process
 * (it filtered by thread before).  libbpf 1.3 probes the same way.
 */
static bool uprobe_multi_works(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = PK_BPF_TRACE_UPROBE_MULTI);
	__u64 offset = 0;
	int prog, link, err1, err2;

	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, 2, &opts);
	if (prog < 0)
		return false;
	link = uprobe_multi_create(prog, "/", &offset, NULL, NULL, 1, 0);
	err1 = link < 0 ? errno : 0;
	if (link >= 0)
		close(link);
	link = uprobe_multi_create(prog, "/", &offset, NULL, NULL, 1, -1);
	err2 = link < 0 ? errno : 0;
	if (link >= 0)
		close(link);
	close(prog);
	return err1 == EBADF && err2 == EINVAL;
}

void usdt_sites_prepare(struct usdt_sites *s, struct bpf_program *prog)
{
	static int works = -1;

	if (works < 0)
		works = uprobe_multi_works();
	s->multi = works;
	if (s->multi)
		bpf_program__set_expected_attach_type(prog,
			(enum bpf_attach_type)PK_BPF_TRACE_UPROBE_MULTI);
}

int usdt_sites_add(struct usdt_sites *s, struct bpf_program *prog,
		   const struct usdt_bin *b, const struct usdt_note *n,
		   __u64 cookie)
{
	struct usdt_pending *p;

	p = realloc(s->pending, (s->npending + 1) * sizeof(*p));
	if (!p) {
		tool_err("cannot attach: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->pending = p;
	s->pending[s->npending++] = (struct usdt_pending){
		.prog = prog, .bin = b - s->bins, .note = n, .cookie = cookie,
	};
	return 0;
}

static void attach_error(const struct target *t, const struct usdt_bin *b,
			 const struct usdt_note *n, size_t nsites, int err)
{
	char probe[USDT_PROBE_MAX], what[USDT_PROBE_MAX + 64];

	if (target_exited_during_attach(t))
		return;
	if (n) {
		usdt_probe_name(n, probe, sizeof(probe));
		snprintf(what, sizeof(what), "%s at 0x%llx", probe, n->pc);
	} else {
		snprintf(what, sizeof(what), "%zu probe site%s", nsites,
			 nsites == 1 ? "" : "s");
	}
	if (err == -EINVAL)
		tool_err("cannot attach to %s in %s: %s (is another tracer "
			 "attached there with another semaphore offset?)", what,
			 b->shown, strerror(-err));
	else {
		char where[sizeof(what) + PATH_MAX + 32];

		snprintf(where, sizeof(where), "cannot attach to %s in %s",
			 what, b->shown);
		if ((err != -EPERM && err != -EACCES) ||
		    !report_denied(where, t->pid))
			tool_err("%s: %s", where, strerror(-err));
	}
}

/* One site, one perf-event uprobe: kernels without multi-uprobe links. */
static int attach_one(struct usdt_sites *s, const struct usdt_pending *p,
		      const struct target *t)
{
	const struct usdt_bin *b = &s->bins[p->bin];
	LIBBPF_OPTS(bpf_uprobe_opts, opts,
		    .ref_ctr_offset = p->note->sema_off,
		    .bpf_cookie = p->cookie);
	struct bpf_link *link;

	link = bpf_program__attach_uprobe_opts(p->prog,
					       t->pid > 0 ? t->pid : -1,
					       b->path, p->note->pc_off, &opts);
	if (!link) {
		int err = -errno;

		attach_error(t, b, p->note, 1, err);
		return err;
	}
	s->links[s->nlinks++] = link;
	return 0;
}

/* The n queued sites from p on, all of one program and one file: one
 * multi-uprobe link. */
static int attach_multi(struct usdt_sites *s, const struct usdt_pending *p,
			size_t n, const struct target *t)
{
	const struct usdt_bin *b = &s->bins[p->bin];
	__u64 *arr = calloc(3 * n, sizeof(*arr));
	int fd, err = 0;

	if (!arr) {
		tool_err("cannot attach: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		arr[i] = p[i].note->pc_off;
		arr[n + i] = p[i].note->sema_off;
		arr[2 * n + i] = p[i].cookie;
	}
	fd = uprobe_multi_create(bpf_program__fd(p->prog), b->path, arr,
				 arr + n, arr + 2 * n, n,
				 t->pid > 0 ? (__u32)t->pid : 0);
	if (fd < 0) {
		err = -errno;
		attach_error(t, b, n == 1 ? p->note : NULL, n, err);
	} else {
		s->fds[s->nfds++] = fd;
	}
	free(arr);
	return err;
}

int usdt_sites_commit(struct usdt_sites *s, const struct target *t)
{
	struct bpf_link **links;
	int err = 0, *fds;
	size_t i, n;

	/* Room for every site queued, those attached before included. */
	links = realloc(s->links, (s->npending + 1) * sizeof(*links));
	if (links)
		s->links = links;
	fds = realloc(s->fds, (s->npending + 1) * sizeof(*fds));
	if (fds)
		s->fds = fds;
	if (!links || !fds) {
		tool_err("cannot attach: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (i = s->ncommitted; !err && i < s->npending; i += n) {
		const struct usdt_pending *p = &s->pending[i];

		if (!s->multi) {
			n = 1;
			err = attach_one(s, p, t);
			continue;
		}
		/* Sites are queued file by file for each program. */
		for (n = 1; i + n < s->npending && p[n].prog == p->prog &&
			    p[n].bin == p->bin; n++)
			;
		err = attach_multi(s, p, n, t);
	}
	s->ncommitted = i;
	return err;
}

/* --- a file replaced (-b PATH followed) ------------------------------------ */

int usdt_watch_open(struct usdt_watch *w, const struct target *t)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(t->exe, '/');
	struct stat st;

	memset(w, 0, sizeof(*w));
	w->fd = -1;
	if (t->pid > 0 || !slash)
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", slash == t->exe ? 1 :
		 (int)(slash - t->exe), t->exe);
	snprintf(w->name, sizeof(w->name), "%s", slash + 1);
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0 || inotify_add_watch(w->fd, dir, IN_MOVED_TO |
					   IN_CLOSE_WRITE) < 0) {
		/* Out of inotify instances or watches (fs.inotify.max_user_*),
		 * say: tracing goes on, without the follow. */
		tool_err("cannot watch %s for a file replacing %s: %s; a new "
			 "file there will not be followed", dir, t->exe,
			 strerror(errno));
		usdt_watch_close(w);
	}
	/* After the watch: a replacement from now on is an event. */
	if (!stat(t->exe, &st)) {
		w->files[0][0] = st.st_dev;
		w->files[0][1] = st.st_ino;
		w->nfiles = 1;
	}
	return 0;
}

void usdt_watch_close(struct usdt_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

int usdt_watch_replaced(struct usdt_watch *w, const struct target *t)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool named = false;
	struct stat st;
	ssize_t len;
	int fd;

	while ((len = read(w->fd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *e = (const void *)p;

			if (e->len && !strcmp(e->name, w->name))
				named = true;
			/* A queue overflow may have lost its event. */
			if (e->mask & IN_Q_OVERFLOW)
				named = true;
			p += sizeof(*e) + e->len;
		}
	if (!named)
		return -1;
	/* Opened once: its notes are read, and its sites attached, through
	 * this descriptor, so a file renamed onto PATH meanwhile cannot
	 * have the one's offsets attached in the other. */
	fd = open(t->exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (w->nfiles && (unsigned long long)st.st_dev == w->files[0][0] &&
	     (unsigned long long)st.st_ino == w->files[0][1])) {
		close(fd);
		return -1;
	}
	memmove(w->files[1], w->files[0], (USDT_WATCH_FILES - 1) *
		sizeof(w->files[0]));
	w->files[0][0] = st.st_dev;
	w->files[0][1] = st.st_ino;
	if (w->nfiles < USDT_WATCH_FILES)
		w->nfiles++;
	return fd;
}

/* Whether a maps line names device dev (MAJ:MIN, hex) and inode ino. */
static bool maps_line_is(const char *line, unsigned long long dev,
			 unsigned long long ino)
{
	unsigned int maj, min;
	unsigned long long i;

	if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &i) != 3)
		return false;
	return i == ino && makedev(maj, min) == dev;
}

bool usdt_watch_mapped(const struct usdt_watch *w)
{
	char path[64], line[512];
	struct dirent *d;
	bool found = false;
	DIR *proc;

	if (!w->nfiles)
		return false;
	proc = opendir("/proc");
	if (!proc)
		return false;
	while (!found && (d = readdir(proc))) {
		FILE *f;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.16s/maps", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		/* A long line is read in pieces: only a line's start holds
		 * its device and inode, and a piece after the first of a
		 * line starts with no address range, so it matches nothing. */
		while (!found && fgets(line, sizeof(line), f))
			for (int i = 0; i < w->nfiles && !found; i++)
				found = maps_line_is(line, w->files[i][0],
						     w->files[i][1]);
		fclose(f);
	}
	closedir(proc);
	return found;
}

int usdt_sites_follow(struct usdt_sites *s, const struct target *t, int fd)
{
	char why[512], path[64];
	size_t first = s->nbins;
	int err;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err = add_bin_why(s, t, t->exe, true, path, why, sizeof(why));
	if (!err && s->nbins == first)
		err = -E2BIG;
	if (err) {
		if (err != -E2BIG)
			tool_err(MSG_REPLACED_NO_PROBES, t->exe, why);
		close(fd);
		return err;
	}
	s->bins[first].fd = fd;
	s->first = first;
	return 0;
}

void usdt_sites_followed(struct usdt_sites *s, const struct target *t,
			 int err)
{
	if (err) {
		s->npending = s->ncommitted;
		return;
	}
	tool_err(MSG_REPLACED_FOLLOWED, t->exe);
}

/* --- a probe that is not there -------------------------------------------- */

static const char *gates[USDT_GATES_MAX];
static int ngates;

bool usdt_arg_name_valid(const char *s)
{
	size_t i;

	if (!*s || isdigit((unsigned char)*s) ||
	    (!strncmp(s, "arg", 3) && isdigit((unsigned char)s[3])))
		return false;
	for (i = 0; s[i]; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_') ||
		    i + 1 == USDT_NAME_MAX)
			return false;
	return true;
}

bool usdt_arg_option(const char *opt, const char *arg, bool tid,
		     struct usdt_arg_ref *out)
{
	const char *choose = tid ? "tid, " : "";

	memset(out, 0, sizeof(*out));
	out->opt = opt;
	if (tid && !strcmp(arg, "tid"))
		return false;
	if (!strcmp(arg, "arg0"))
		usage_error("argument %s: 'arg0': arguments count from 1 here, "
			    "as in BCC: bpftrace's arg0 is arg1, its argN "
			    "argN+1 (choose %san argument's name, or arg1 to "
			    "arg%d)", opt, choose, USDT_ARGC_MAX);
	if (!strncmp(arg, "arg", 3) && isdigit((unsigned char)arg[3])) {
		if (arg[3] == '0' ||
		    parse_long(arg + 3, 1, USDT_ARGC_MAX, &out->n))
			usage_error("argument %s: invalid choice: '%.64s' "
				    "(choose %san argument's name, or arg1 to "
				    "arg%d)", opt, escaped(arg), choose,
				    USDT_ARGC_MAX);
	} else if (usdt_arg_name_valid(arg)) {
		out->name = arg;
	} else {
		usage_error("argument %s: invalid choice: '%.64s' (choose "
			    "%san argument's name, or arg1 to arg%d)", opt,
			    escaped(arg), choose, USDT_ARGC_MAX);
	}
	snprintf(out->label, sizeof(out->label), "%s", arg);
	return true;
}

/* The probekit note of n's probe in b, its notes read once; NULL when b
 * has none for it (or they could not be read: then as for none, since
 * the stapsdt notes, which the tool needs, were read). */
static const struct usdt_probe_args *probe_names(const struct usdt_bin *cb,
						 const struct usdt_note *n)
{
	/* The names are a cache of the file's, read on first use. */
	struct usdt_bin *b = (struct usdt_bin *)cb;
	char err[256];

	if (!b->names_read) {
		b->names_read = usdt_probe_args_read(b->path, &b->names,
						     &b->nnames, err,
						     sizeof(err)) ? -1 : 1;
	}
	if (b->names_read < 0)
		return NULL;
	return usdt_probe_args_find(b->names, b->nnames, n->provider, n->name);
}

int usdt_arg_index(const struct usdt_bin *b, const struct usdt_note *n,
		   const char *name, char *why, size_t whylen)
{
	const struct usdt_probe_args *pa = probe_names(b, n);
	char probe[USDT_PROBE_MAX], tail[USDT_NAME_MAX + 32];
	const char *near = NULL;
	size_t best = SIZE_MAX, d;
	int i;

	usdt_probe_name(n, probe, sizeof(probe));
	if (!pa) {
		snprintf(why, whylen, SPEC_ARG_NO_NAMES, b->shown, probe, "arg1");
		return -1;
	}
	for (i = 0; i < pa->argc; i++) {
		if (!strcmp(pa->args[i].name, name))
			return i + 1;
		/* The first of equals, as toolspec.nearest(). */
		d = usdt_distance(name, pa->args[i].name);
		if (d < best) {
			best = d;
			near = pa->args[i].name;
		}
	}
	if (near)
		snprintf(tail, sizeof(tail), SPEC_NEAREST, near);
	else
		snprintf(tail, sizeof(tail), "%s", SPEC_NO_PROBES);
	snprintf(why, whylen, SPEC_ARG_UNKNOWN "%s", probe, name, tail);
	return -1;
}

int usdt_arg_resolve(struct usdt_bin *b, const struct usdt_note *n,
		     const struct usdt_arg_ref *r, bool string,
		     struct usdt_site_arg *out)
{
	const struct usdt_probe_args *pa = probe_names(b, n);
	char probe[USDT_PROBE_MAX], why[PATH_MAX + 512];
	long argn = r->n;
	int err;

	usdt_probe_name(n, probe, sizeof(probe));
	if (r->name) {
		argn = usdt_arg_index(b, n, r->name, why, sizeof(why));
		if (argn < 0) {
			tool_err("%s", why);
			return -EINVAL;
		}
	}
	if (!string || !pa || argn > pa->argc)
		return string ? usdt_site_str_arg_of(b, n, argn, out) :
				usdt_site_arg_of(b, n, argn, out);
	/* The probe's C types say what is a string. */
	if (!usdt_type_is_string(pa->args[argn - 1].type)) {
		/* The option as its short form: "-S". */
		tool_err(SPEC_ARG_NOT_STRING, (int)strcspn(r->opt, "/"), r->opt,
			 r->label, r->label, probe, pa->args[argn - 1].type);
		return -EINVAL;
	}
	err = usdt_site_arg_of(b, n, argn, out);
	return err;
}

void usdt_gate_option(const char *arg)
{
	if (!usdt_probe_valid(arg, false))
		usage_error("--gate: '%s' is not a probe: give provider:name, "
			    "as tplist prints it", escaped(arg));
	if (ngates == USDT_GATES_MAX)
		usage_error("--gate: at most %d gates", USDT_GATES_MAX);
	gates[ngates++] = arg;
}

bool usdt_gates_given(void)
{
	return ngates > 0;
}

const char *usdt_empty_gated(char *buf, size_t len, const char *empty,
			     const char (*names)[USDT_PROBE_MAX], size_t n)
{
	static const struct {
		const char *probe, *gate;
	} gated[] = { SPEC_GATED };

	snprintf(buf, len, "%s", empty);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < sizeof(gated) / sizeof(gated[0]); k++) {
			bool on = false;

			if (strcmp(names[i], gated[k].probe))
				continue;
			for (size_t j = 0; j < n; j++)
				on |= !strcmp(names[j], gated[k].gate);
			for (int g = 0; g < ngates; g++)
				on |= !strcmp(gates[g], gated[k].gate);
			if (!on) {
				snprintf(buf, len, SPEC_EMPTY_GATED, empty,
					 names[i], gated[k].gate);
				return buf;
			}
		}
	return buf;
}

const char *usdt_empty_keys(char *buf, size_t len, const char *empty,
			    const char *arg, const struct usdt_site_arg types[2])
{
	char t[2][32];

	for (int i = 0; i < 2; i++)
		snprintf(t[i], sizeof(t[i]), SPEC_ARG_TYPE, (int)types[i].size,
			 types[i].is_signed ? "signed" : "unsigned");
	snprintf(buf, len, SPEC_EMPTY_KEYS, empty, arg, t[0], t[1]);
	return buf;
}

int usdt_sites_gates(struct usdt_sites *s, struct bpf_program *prog,
		     const struct target *t)
{
	for (int g = 0; g < ngates; g++) {
		bool found = false;
		int err;

		for (size_t i = 0; i < s->nbins; i++)
			for (size_t k = 0; k < s->bins[i].n; k++) {
				if (!usdt_probe_match(gates[g],
						      &s->bins[i].notes[k]))
					continue;
				found = true;
				err = usdt_sites_add(s, prog, &s->bins[i],
						     &s->bins[i].notes[k], 0);
				if (err)
					return err;
			}
		if (!found) {
			usdt_sites_missing(s, t, gates[g], false);
			return -ENOENT;
		}
	}
	return 0;
}

void usdt_sites_missing(const struct usdt_sites *s, const struct target *t,
			const char *pattern, bool glob)
{
	char where[PATH_MAX + 300], probe[USDT_PROBE_MAX], best[USDT_PROBE_MAX];
	char tail[USDT_PROBE_MAX + 32];
	size_t dmin = SIZE_MAX;

	/* A process that exited meanwhile left files unread: say so, not
	 * that its probes are missing. */
	if (target_exited_during_attach(t))
		return;

	if (t->pid > 0)
		snprintf(where, sizeof(where), "PID %d (%s) or the files it maps",
			 (int)t->pid, t->comm);
	else
		snprintf(where, sizeof(where), "%s", t->exe);
	best[0] = '\0';
	for (size_t i = s->first; i < s->nbins; i++)
		for (size_t k = 0; k < s->bins[i].n; k++) {
			size_t d;

			usdt_probe_name(&s->bins[i].notes[k], probe,
					sizeof(probe));
			d = usdt_distance(pattern, probe);
			if (d < dmin) {
				dmin = d;
				snprintf(best, sizeof(best), "%s", probe);
			}
		}
	snprintf(tail, sizeof(tail), best[0] ? SPEC_NEAREST : "%s",
		 best[0] ? best : SPEC_NO_PROBES);
	if (s->first) {
		char why[USDT_PROBE_MAX * 2 + 64];

		snprintf(why, sizeof(why), "no USDT probe %s%s%s", glob ? "matches " : "", pattern,
			 tail);
		tool_err(MSG_REPLACED_NO_PROBES, t->exe, why);
		return;
	}
	tool_err("no USDT probe %s%s in %s%s", glob ? "matches " : "",
		 pattern, where, tail);
}

bool usdt_probe_match(const char *pattern, const struct usdt_note *n)
{
	char probe[USDT_PROBE_MAX];

	if (!strchr(pattern, ':'))
		return !fnmatch(pattern, n->name, 0);
	usdt_probe_name(n, probe, sizeof(probe));
	return !fnmatch(pattern, probe, 0);
}
