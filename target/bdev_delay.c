// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_delay.c: a bdev that adds a fixed latency to the reads and writes
 * of another (its base), to make a slow device to look at, as SPDK's delay
 * bdev does.
 *
 * The base does the work at submission (bdev_execute(), so a uprobe there
 * sees only the base's time); the io then waits on its reactor's queue,
 * ordered by due time, until the one timer of that reactor fires for the
 * earliest.  Nothing sleeps: the reactor keeps serving everything else,
 * and every I/O in flight gets its own delay.  An io is completed on the
 * reactor that submitted it, through bdev_io_done().
 *
 * Lifetime: the delay bdev is stacked on its base, so the base cannot
 * be deleted under it; I/O in flight on the delay bdev holds a user or an
 * export of it (whoever submits does), so it cannot be deleted with I/O
 * queued here.  A reactor's timer exists only while its queue is not
 * empty, so nothing is left behind when the I/O stops.
 */
#include <errno.h>
#include <stdlib.h>

#include "bdev_delay.h"
#include "reactor.h"

struct delay_disk {
	struct bdev *base;
	uint64_t read_ns, write_ns;
};

/* Per reactor: ios sorted by due time (ties in submission order), and the
 * timer armed for the head.  One cache line each. */
struct delay_thread {
	_Alignas(64) struct bdev_io *head, *tail;
	struct reactor_timer *timer;
};

static struct delay_thread threads[REACTOR_MAX];

static uint64_t due_ns(const struct bdev_io *io)
{
	const struct delay_disk *d = io->bdev->priv;

	switch (io->type) {
	case BDEV_IO_READ:
		return io->submit_ns + d->read_ns;
	case BDEV_IO_WRITE:
		return io->submit_ns + d->write_ns;
	default:
		return io->submit_ns;
	}
}

/* Arm t's timer for its head: 0, or -errno (the timer is gone then). */
static int arm(struct delay_thread *t)
{
	uint64_t due = due_ns(t->head), now = reactor_now_ns();

	/* 0 would disarm it: an io already due fires at once instead. */
	return reactor_timer_set(t->timer, due > now ? due - now : 1, 0);
}

/* Complete every queued io now and drop the timer: what is left to do
 * when the timer cannot be armed (timerfd_settime does not fail on a valid
 * fd and time; if it ever does, completing early beats hanging the I/O). */
static void flush_all(struct delay_thread *t)
{
	while (t->head) {
		struct bdev_io *io = t->head;

		t->head = io->next;
		bdev_io_done(io);       /* reuses io->next: read it first */
	}
	t->tail = NULL;
	reactor_timer_remove(t->timer);
	t->timer = NULL;
}

static void tick(void *ctx)
{
	struct delay_thread *t = ctx;
	uint64_t now = reactor_now_ns();

	while (t->head && due_ns(t->head) <= now) {
		struct bdev_io *io = t->head;

		t->head = io->next;
		if (!t->head)
			t->tail = NULL;
		bdev_io_done(io);
	}
	if (!t->head) {
		reactor_timer_remove(t->timer);  /* allowed inside its own fn */
		t->timer = NULL;
	} else if (arm(t) != 0) {
		flush_all(t);
	}
}

/* Put io in due order.  Most ios go last (same delay, later submission),
 * so the tail is checked first. */
static void enqueue(struct delay_thread *t, struct bdev_io *io)
{
	uint64_t due = due_ns(io);
	struct bdev_io **pp;

	io->next = NULL;
	if (!t->head) {
		t->head = t->tail = io;
		return;
	}
	if (due >= due_ns(t->tail)) {
		t->tail->next = io;
		t->tail = io;
		return;
	}
	for (pp = &t->head; due_ns(*pp) <= due; pp = &(*pp)->next)
		;
	io->next = *pp;
	*pp = io;
}

static int delay_submit(struct bdev *b, struct bdev_io *io)
{
	struct delay_disk *d = b->priv;
	struct delay_thread *t = &threads[reactor_index(reactor_self())];
	int64_t done;

	if (!t->timer) {
		t->timer = reactor_timer_add(0, 0, tick, t);
		if (!t->timer)
			return -errno;
	}
	done = bdev_execute(d->base, io->type, io->offset, io->len, io->buf, io->fua);
	io->status = done < 0 ? (int)done : 0;
	enqueue(t, io);
	if (t->head == io && arm(t) != 0)
		flush_all(t);
	return 0;
}

/* Never called: submit replaces it.  bdev.h's contract wants one. */
static int64_t delay_execute(struct bdev *b, enum bdev_io_type type, uint64_t offset,
			     uint64_t len, void *buf, bool fua)
{
	struct delay_disk *d = b->priv;

	return bdev_execute(d->base, type, offset, len, buf, fua);
}

static void delay_destroy(struct bdev *b)
{
	struct delay_disk *d = b->priv;

	d->base->stacked--;
	free(d);
}

static const struct bdev_ops delay_ops = {
	.type = "delay",
	.execute = delay_execute,
	.submit = delay_submit,
	.destroy = delay_destroy,
};

int bdev_delay_create(const char *name, const char *base, uint64_t read_us, uint64_t write_us,
		      struct bdev **out)
{
	struct delay_disk *d;
	struct bdev *bb;
	int rc;

	if (bdev_lookup(name))
		return -EEXIST;
	bb = bdev_lookup(base);
	if (!bb)
		return -ENODEV;
	rc = bdev_check_params(name, bb->block_size);
	if (rc)
		return rc;
	if (read_us > BDEV_DELAY_MAX_US || write_us > BDEV_DELAY_MAX_US)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->base = bb;
	d->read_ns = read_us * 1000;
	d->write_ns = write_us * 1000;
	rc = bdev_register(name, &delay_ops, bb->num_blocks, bb->block_size, d, out);
	if (rc) {
		free(d);
		return rc;
	}
	bb->stacked++;
	return 0;
}
