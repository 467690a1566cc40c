// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_tx.h: NBD transmission (nbd_tx.c), on the connection's reactor.
 */
#ifndef BLKTGT_NBD_TX_H
#define BLKTGT_NBD_TX_H

#include <stdint.h>

#include "nbd_conn.h"

/* c was handed to the calling reactor and watched for input: serve what
 * the client sent behind its last option. */
void nbd_tx_start(struct nbd_conn *c);
/* Socket events on c while it transmits. */
void nbd_tx_events(struct nbd_conn *c, uint32_t events);
/* Reading paused for too much in flight: resume it when the load fell. */
void nbd_tx_unblock(struct nbd_conn *c);
/* A closed connection: drop queued replies and a half-received write. */
void nbd_tx_drop(struct nbd_conn *c);
/* Free the idle requests (the connection is being freed). */
void nbd_tx_free(struct nbd_conn *c);
/* Transmission requests received, summed over every reactor
 * (approximate while I/O runs). */
uint64_t nbd_tx_requests(void);

#endif
