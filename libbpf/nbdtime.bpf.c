// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * nbdtime.bpf.c: where an NBD request's time goes, from blktgt's USDT
 * probes and the kernel's syscall tracepoints side by side.
 *
 * bcc/nbdtime says what each histogram measures and how a request's share
 * of its connection's socket syscalls is estimated; this is the same
 * program with libbpf.  The tracepoints' records are read at offsets user
 * space found in their tracefs formats, not with CO-RE: a CO-RE
 * relocation makes libbpf parse the kernel's 5 MB BTF at every start.
 *
 * Every table kept between two probes is a pair table (pair_state.bpf.h):
 * a START the full table refuses is counted as dropped, and the exit of
 * the thread (sys) or of the process (the others) reclaims what it left.
 * A value whose histogram finds the map of histograms full (--max-keys
 * of them: the syscall stages keep one per thread) is counted apart, in
 * histogram.bpf.h's hist_dropped: it lost no START.
 */
#include "probekit.bpf.h"
#include <bpf/usdt.bpf.h>

#include "nbdtime.h"
#include "histogram.bpf.h"
#include "pair_state.bpf.h"

/* Options, set by user space before load. */
const volatile __u32 tgid = 0;		/* -p */
const volatile bool per_cmd = false;	/* -C */
const volatile bool linear = false;	/* -L */
const volatile __u64 width = 0;		/* -W: linear bucket width, in units
					 * (user space sets it: the spec's
					 * default, or -W) */
const volatile __u64 unit_ns = 1000;	/* -n 1, -u 1000, -m 1000000 */
/* Where a syscall tracepoint's record holds the first argument (a long)
 * and the return value (a long): every syscall's entry record has one
 * layout, and every exit record too, so sendto's say for all four. */
const volatile __u32 sys_arg0_off = 0;
const volatile __u32 sys_ret_off = 0;

/* The keys of the tables: the process (pair_state.bpf.h), the thread
 * for sys alone (a request, I/O or connection may end on any thread),
 * then what a table is keyed by. */
struct nt_req_key {
	struct pair_key_head head;
	__u64 conn;
	__u64 handle;
};

struct nt_id_key {
	struct pair_key_head head;
	__u64 id;		/* an I/O, a connection or an fd */
};

struct nt_req {
	__u64 ts;
	__u64 rx_seq;		/* the recv batch that brought its header */
	__u64 len;
	__u32 cmd;
	char name[IOTYPE_LEN];
};

/* One recv that returned data, and how many headers were parsed from it. */
struct nt_batch {
	__u64 seq;
	__u64 dur;
	__u64 n;
};

struct nt_conn {
	__u64 fd;
	__u64 rx_seq;		/* the latest batch */
	__u64 tx_dur, tx_bytes;	/* the latest send */
	struct nt_batch rx[NBDTIME_RX_RING];
};

struct nt_sys_start {
	__u64 ts;
	__u64 fd;
	__u32 send;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_INFLIGHT_DEFAULT);	/* --max-inflight */
	__type(key, struct nt_req_key);
	__type(value, struct nt_req);
} reqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_INFLIGHT_DEFAULT);	/* --max-inflight */
	__type(key, struct nt_id_key);	/* I/O id */
	__type(value, __u64);		/* submit time, ns */
} ios SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NBDTIME_MAX_CONNS);
	__type(key, struct nt_id_key);	/* connection id */
	__type(value, struct nt_conn);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NBDTIME_MAX_CONNS);
	__type(key, struct nt_id_key);	/* fd */
	__type(value, __u64);		/* connection id */
} fds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NBDTIME_MAX_THREADS);
	__type(key, struct pair_key_head);	/* the thread */
	__type(value, struct nt_sys_start);
} sys SEC(".maps");

DRAINED_HASH(hists, struct nbdtime_key, struct hist, MAX_HISTS, BPF_F_NO_PREALLOC);	/* --max-keys */

/* A zeroed struct nt_conn: too big for the BPF stack. */
static const struct nt_conn conn_zero;

/* The key of id in the traced process's conns, fds or ios. */
static __always_inline struct nt_id_key nt_key(__u64 id)
{
	struct nt_id_key k = { .head.tgid = tgid, .id = id };

	return k;
}

/* The connection whose id is *conn_id, or NULL. */
static __always_inline struct nt_conn *nt_conn(__u64 conn_id)
{
	struct nt_id_key k = nt_key(conn_id);

	return bpf_map_lookup_elem(&conns, &k);
}

/* A full map of histograms drops the value, and hist_get() counts it. */
static __always_inline void count(__u32 stage, __u32 tid, const char *cmd,
				  __u64 ns)
{
	struct nbdtime_key key = {};

	key.stage = stage;
	key.tid = tid;
	if (per_cmd && cmd)
		__builtin_memcpy(key.cmd, cmd, sizeof(key.cmd));
	hist_increment(&hists, &key, hist_slot(ns / unit_ns, linear, width));
}

/* blktgt:nbd__transmit(u64 conn, s32 fd, u32 thread) */
SEC("usdt")
int BPF_USDT(nbd_transmit, __u64 id, __s32 fd32)
{
	hit_count();
	__u64 fd = (__u32)fd32;
	struct nt_id_key ck = nt_key(id), fk = nt_key(fd);
	struct nt_conn *c;

	if (pair_start(&conns, &ck, &conn_zero))
		return 0;
	c = bpf_map_lookup_elem(&conns, &ck);
	if (!c)
		return 0;
	c->fd = fd;
	pair_start(&fds, &fk, &id);
	return 0;
}

/* blktgt:nbd__disconnect(u64 conn, char *peer, u64 requests) */
SEC("usdt")
int BPF_USDT(nbd_disconnect, __u64 id)
{
	hit_count();
	struct nt_id_key ck = nt_key(id), fk;
	struct nt_conn *c = bpf_map_lookup_elem(&conns, &ck);
	__u64 *owner;

	if (!c)
		return 0;
	fk = nt_key(c->fd);
	owner = bpf_map_lookup_elem(&fds, &fk);
	if (owner && *owner == id)	/* not yet a newer connection's fd */
		bpf_map_delete_elem(&fds, &fk);
	bpf_map_delete_elem(&conns, &ck);
	return 0;
}

/* blktgt:nbd__request(u64 conn, u64 handle, u32 cmd, u64 offset, u32 len,
 *                     char *cmd_name, u32 flags) */
SEC("usdt")
int BPF_USDT(nbd_request, __u64 conn, __u64 handle, __u32 cmd, __u64 offset,
	     __u32 len, const char *cmd_name)
{
	hit_count();
	struct nt_req_key k = { .head.tgid = tgid, .conn = conn,
				.handle = handle };
	struct nt_req r = {};
	struct nt_conn *c;

	if (cmd == NBDTIME_CMD_DISC)
		return 0;	/* never answered */
	r.ts = bpf_ktime_get_ns();
	r.cmd = cmd;
	r.len = len;
	if (per_cmd)
		bpf_probe_read_user_str(r.name, sizeof(r.name), (void *)cmd_name);
	c = nt_conn(conn);
	if (c) {
		struct nt_batch *b = &c->rx[c->rx_seq & (NBDTIME_RX_RING - 1)];

		r.rx_seq = c->rx_seq;
		if (b->seq == c->rx_seq)
			__sync_fetch_and_add(&b->n, 1);
	}
	pair_start(&reqs, &k, &r);
	return 0;
}

/* blktgt:nbd__reply(u64 conn, u64 handle, u32 cmd, u32 error) */
SEC("usdt")
int BPF_USDT(nbd_reply, __u64 conn, __u64 handle, __u32 cmd, __u32 error)
{
	hit_count();
	struct nt_req_key k = { .head.tgid = tgid, .conn = conn,
				.handle = handle };
	__u64 now = bpf_ktime_get_ns(), share = 0;
	struct nt_req *r;
	struct nt_conn *c;

	r = bpf_map_lookup_elem(&reqs, &k);
	if (!r)
		return 0;	/* sent before tracing started */
	count(STAGE_REQUEST, 0, r->name, now - r->ts);
	c = nt_conn(conn);
	if (c) {
		struct nt_batch *b = &c->rx[r->rx_seq & (NBDTIME_RX_RING - 1)];
		__u64 bytes = NBDTIME_REPLY_LEN;

		if (b->seq == r->rx_seq && b->n)
			share += b->dur / b->n;
		if (r->cmd == NBDTIME_CMD_READ && error == 0)
			bytes += r->len;
		if (c->tx_bytes)
			share += c->tx_dur * bytes / c->tx_bytes;
	}
	count(STAGE_SHARE, 0, r->name, share);
	bpf_map_delete_elem(&reqs, &k);
	return 0;
}

/* blktgt:io__submit(u64 id, char *bdev, u32 type, u64 offset, u64 len,
 *                   char *type_name) */
SEC("usdt")
int BPF_USDT(io_submit, __u64 id)
{
	hit_count();
	struct nt_id_key k = nt_key(id);
	__u64 ts = bpf_ktime_get_ns();

	pair_start(&ios, &k, &ts);
	return 0;
}

/* blktgt:io__done(u64 id, char *bdev, u32 type, u64 len, s32 status,
 *                 char *type_name) */
SEC("usdt")
int BPF_USDT(io_done, __u64 id, const char *bdev, __u32 type, __u64 len,
	     __s32 status, const char *type_name)
{
	hit_count();
	struct nt_id_key k = nt_key(id);
	char name[IOTYPE_LEN] = {};
	__u64 *tsp, delta;

	tsp = bpf_map_lookup_elem(&ios, &k);
	if (!tsp)
		return 0;	/* submitted before tracing started */
	delta = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&ios, &k);
	if (per_cmd)
		bpf_probe_read_user_str(name, sizeof(name), (void *)type_name);
	count(STAGE_BDEV, 0, name, delta);
	return 0;
}

/* --- the syscall tracepoints ------------------------------------------- */

static __always_inline int sys_enter(void *ctx, __u32 send)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct pair_key_head k = { .tgid = id >> 32, .tid = (__u32)id };
	struct nt_sys_start s = {};
	unsigned long fd = 0;

	if (k.tgid != tgid)
		return 0;
	s.ts = bpf_ktime_get_ns();
	bpf_probe_read_kernel(&fd, sizeof(fd), ctx + sys_arg0_off);
	s.fd = (__u32)fd;
	s.send = send;
	pair_start(&sys, &k, &s);
	return 0;
}

static __always_inline int sys_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), dur, *conn_id;
	struct pair_key_head k = { .tgid = id >> 32, .tid = (__u32)id };
	struct nt_id_key fk;
	struct nt_sys_start *s;
	struct nt_conn *c = NULL;
	long ret = 0;

	if (k.tgid != tgid)
		return 0;
	bpf_probe_read_kernel(&ret, sizeof(ret), ctx + sys_ret_off);
	s = bpf_map_lookup_elem(&sys, &k);
	if (!s)
		return 0;	/* entered before tracing started */
	dur = bpf_ktime_get_ns() - s->ts;
	fk = nt_key(s->fd);
	conn_id = bpf_map_lookup_elem(&fds, &fk);
	if (conn_id)
		c = nt_conn(*conn_id);
	count(c ? STAGE_SYS_NBD : STAGE_SYS_OTHER, k.tid, NULL, dur);
	if (c && ret > 0) {
		if (s->send) {
			c->tx_dur = dur;
			c->tx_bytes = ret;
		} else {
			__u64 seq = c->rx_seq + 1;
			struct nt_batch *b = &c->rx[seq & (NBDTIME_RX_RING - 1)];

			b->seq = seq;
			b->dur = dur;
			b->n = 0;
			c->rx_seq = seq;
		}
	}
	bpf_map_delete_elem(&sys, &k);
	return 0;
}

SEC("tp/syscalls/sys_enter_recvfrom")
int enter_recvfrom(void *ctx)
{
	return sys_enter(ctx, 0);
}

SEC("tp/syscalls/sys_enter_recvmsg")
int enter_recvmsg(void *ctx)
{
	return sys_enter(ctx, 0);
}

SEC("tp/syscalls/sys_enter_sendto")
int enter_sendto(void *ctx)
{
	return sys_enter(ctx, 1);
}

SEC("tp/syscalls/sys_enter_sendmsg")
int enter_sendmsg(void *ctx)
{
	return sys_enter(ctx, 1);
}

SEC("tp/syscalls/sys_exit_recvfrom")
int exit_recvfrom(void *ctx)
{
	return sys_exit(ctx);
}

SEC("tp/syscalls/sys_exit_recvmsg")
int exit_recvmsg(void *ctx)
{
	return sys_exit(ctx);
}

SEC("tp/syscalls/sys_exit_sendto")
int exit_sendto(void *ctx)
{
	return sys_exit(ctx);
}

SEC("tp/syscalls/sys_exit_sendmsg")
int exit_sendmsg(void *ctx)
{
	return sys_exit(ctx);
}

/* A thread's exit reclaims its syscall in progress; the process's, every
 * request, I/O and connection it left (the process last: pair_on_exit()
 * forgets it). */
SEC("raw_tp/sched_process_exit")
int nt_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct pair_key_head thread = { .tgid = id >> 32, .tid = (__u32)id };

	pair_exit_reclaim(ctx, &reqs, NULL);
	pair_exit_reclaim(ctx, &ios, NULL);
	pair_exit_reclaim(ctx, &fds, NULL);
	pair_exit_reclaim(ctx, &conns, NULL);
	return pair_on_exit(ctx, &sys, &thread);
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
