// SPDX-License-Identifier: BSD-2-Clause
/*
 * states.c: name tables for the enums of states.h.
 *
 * The tables are char arrays in .data/.bss rather than pointers to string
 * literals, and states_init() writes them at start-up, so every name sits
 * on a page the process has touched and bpftrace's str() reads it.
 */
#include <string.h>

#include "states.h"

#define STATE_NAME_MAX 16

#define STATES_LITERAL(e, name) name,

static const char *const target_literals[] = { TARGET_STATE_LIST(STATES_LITERAL) };
static const char *const export_literals[] = { EXPORT_STATE_LIST(STATES_LITERAL) };
static const char *const io_literals[] = { IO_TYPE_LIST(STATES_LITERAL) };

static char target_names[TARGET_STATE_COUNT][STATE_NAME_MAX];
static char export_names[EXPORT_STATE_COUNT][STATE_NAME_MAX];
static char io_names[BDEV_IO_TYPE_COUNT][STATE_NAME_MAX];
static char unknown_name[STATE_NAME_MAX];

static void copy_table(char (*dst)[STATE_NAME_MAX], const char *const *src, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		_Static_assert(STATE_NAME_MAX > 8, "state names are short");
		strncpy(dst[i], src[i], STATE_NAME_MAX - 1);
		dst[i][STATE_NAME_MAX - 1] = '\0';
	}
}

void states_init(void)
{
	copy_table(target_names, target_literals, TARGET_STATE_COUNT);
	copy_table(export_names, export_literals, EXPORT_STATE_COUNT);
	copy_table(io_names, io_literals, BDEV_IO_TYPE_COUNT);
	strcpy(unknown_name, "?");
}

const char *target_state_name(enum target_state s)
{
	return (unsigned)s < TARGET_STATE_COUNT ? target_names[s] : unknown_name;
}

const char *export_state_name(enum export_state s)
{
	return (unsigned)s < EXPORT_STATE_COUNT ? export_names[s] : unknown_name;
}

const char *bdev_io_type_name(enum bdev_io_type t)
{
	return (unsigned)t < BDEV_IO_TYPE_COUNT ? io_names[t] : unknown_name;
}
