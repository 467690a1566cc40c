// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_neg.h: NBD negotiation (nbd_neg.c), on reactor 0.
 */
#ifndef BLKTGT_NBD_NEG_H
#define BLKTGT_NBD_NEG_H

#include <stdbool.h>
#include <stdint.h>

#include "nbd_conn.h"

/* Greet c, just accepted on reactor 0 with its socket watched for input,
 * and negotiate with it. */
void nbd_neg_start(struct nbd_conn *c);
/*
 * Socket events on c while it negotiates (reactor 0).  True when c is
 * ready to be handed to its reactor: an export is chosen, c holds a
 * reference to it and its limits, and the last reply is sent.  Otherwise
 * it goes on negotiating, or failed (nbd_conn_fail).
 */
bool nbd_neg_events(struct nbd_conn *c, uint32_t events);

#endif
