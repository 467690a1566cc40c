// SPDX-License-Identifier: BSD-2-Clause
/* badlat.c: user space of badlat.bpf.c (never built; probecheck reads it). */
#include "badlat.skel.h"

int attach(struct badlat_bpf *obj, int pid, const char *path)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uopts, .func_name = "bdev_execute_x",
		    .retprobe = true);

	obj->links.on_submit = bpf_program__attach_usdt(obj->progs.on_submit,
			pid, path, "blktgt", "io__submit", NULL);
	obj->links.on_done = bpf_program__attach_usdt(obj->progs.on_done,
			pid, path, "blktgt", "io__done", NULL);
	obj->links.on_request = bpf_program__attach_usdt(obj->progs.on_request,
			pid, path, "blktgt", "rpc__request", NULL);
	return 0;
}
