// SPDX-License-Identifier: BSD-2-Clause
/*
 * target.c: blktgt's command line and lifecycle (its main()).
 *
 *   NONE -> INIT -> THREADS -> RPC -> LISTEN -> CONFIG -> RUNNING -> SHUTDOWN
 *
 * Each state is announced by the target__state probe.  Start-up after
 * THREADS runs as messages on reactor 0, which also owns the signals
 * (signalfd), the RPC server and the NBD listeners.  Shutdown, from a
 * signal, target_shutdown or a failed start-up, undoes it in order:
 * workloads, NBD clients and listeners, exports, bdevs, RPC, reactors.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bdev.h"
#include "blktgt_probes.h"
#include "export.h"
#include "json.h"
#include "jsonrpc.h"
#include "log.h"
#include "nbd.h"
#include "nbd_proto.h"
#include "probekit_version.h"
#include "reactor.h"
#include "target.h"
#include "trace.h"
#include "workload.h"

#define DEFAULT_THREADS   2
#define DEFAULT_RPC_SOCK  "/var/tmp/blktgt.sock"
#define DEFAULT_NBD_HOST  "127.0.0.1"
#define DEFAULT_NBD_PORT  10809
#define HOST_MAX          255

static struct {
	unsigned threads;
	bool listen_tcp;
	char host[HOST_MAX + 1];
	uint16_t port;
	const char *unix_path;
	const char *rpc_path;
	const char *config;
} opt = {
	.threads = DEFAULT_THREADS,
	.listen_tcp = true,
	.host = DEFAULT_NBD_HOST,
	.port = DEFAULT_NBD_PORT,
	.rpc_path = DEFAULT_RPC_SOCK,
};

static enum target_state state;
static uint64_t start_ns;
static int exit_code;
static bool shutting_down;
static int signal_fd = -1;
static struct reactor_fd *signal_watch;
static struct reactor_timer *clock_timer;  /* the trace ring's calibration */
static uint16_t bound_port;

/* The -c file while it is applied. */
static struct {
	char *text;
	struct json_val *vals;
	char *scratch;
	const struct json_val *next;    /* the next call */
	uint32_t left, index;
} config;

enum target_state target_state(void)
{
	return state;
}

uint64_t target_uptime_ns(void)
{
	return reactor_now_ns() - start_ns;
}

static void set_state(enum target_state s)
{
	state = s;
	if (BLKTGT_TARGET_STATE_ENABLED())
		BLKTGT_TARGET_STATE(s, target_state_name(s));
	log_debug("state %s", target_state_name(s));
}

/* --- the trace ring's clock ------------------------------------------- */

/*
 * Where the trace ring records the TSC, (TSC, CLOCK_MONOTONIC) pairs go
 * into its file, and the dump tool converts with the slope between the
 * first and the newest.  A pair is good to about one TSC read, so the
 * slope's error is that over the pairs' span, and an event past the newest
 * pair is off by that slope error times its distance from it.  Pairs at
 * 4 ms, 8 ms, 16 ms, ... keep every event within one span of the newest
 * pair from the start; from 1 s on, one a second is plenty, and a file
 * left by kill -9 has a pair at most a second older than its last event.
 */
#define CLOCK_TICK_FIRST_NS 4000000ull
#define CLOCK_TICK_MAX_NS   1000000000ull

static uint64_t clock_tick_ns;

static void clock_tick(void *ctx)
{
	int rc;

	trace_clock_sync();
	if (clock_tick_ns == CLOCK_TICK_MAX_NS)
		return;
	clock_tick_ns *= 2;
	if (clock_tick_ns > CLOCK_TICK_MAX_NS)
		clock_tick_ns = CLOCK_TICK_MAX_NS;
	rc = reactor_timer_set(clock_timer, clock_tick_ns,
			       clock_tick_ns == CLOCK_TICK_MAX_NS ? clock_tick_ns : 0);
	if (rc)
		log_warn("trace ring: clock calibration tick: %s", strerror(-rc));
}

static void clock_tick_start(void)
{
	if (!trace_clock_tsc)
		return;
	clock_tick_ns = CLOCK_TICK_FIRST_NS;
	clock_timer = reactor_timer_add(clock_tick_ns, 0, clock_tick, NULL);
	if (!clock_timer)       /* not fatal: conversions use the start-up slope */
		log_warn("trace ring: no clock calibration tick: %s", strerror(errno));
}

/* --- descriptors -------------------------------------------------------- */

/* Descriptors besides connections, file bdevs and the reactors' own: stdio,
 * listeners, signalfd, timers, the trace ring file, the RPC reserve. */
#define FD_FIXED 32

/*
 * Each connection and each file bdev holds a descriptor, and a soft limit
 * of 1024 (a common default) is less than the caps allow; at the limit
 * accept() fails and clients wait in the backlog.  So raise the soft
 * limit as far as the caps need, up to the hard limit, and say what
 * happened either way, since only the hard limit can explain a shortfall.
 */
static void fd_limit_raise(void)
{
	rlim_t need = NBD_MAX_CONNECTIONS + JSONRPC_MAX_CONNS + BDEV_MAX_COUNT +
		      2 * opt.threads + FD_FIXED;
	struct rlimit rl;
	rlim_t was;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		log_warn("fd limit: getrlimit: %s", strerror(errno));
		return;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return;
	was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
	if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		log_warn("fd limit: cannot raise the soft limit from %llu to %llu: %s",
			 (unsigned long long)was, (unsigned long long)rl.rlim_cur,
			 strerror(errno));
		rl.rlim_cur = was;
	}
	if (rl.rlim_cur >= need) {
		log_info("fd limit: soft limit raised from %llu to %llu, for %d NBD and %d RPC "
			 "connections and %d file bdevs", (unsigned long long)was,
			 (unsigned long long)need, NBD_MAX_CONNECTIONS, JSONRPC_MAX_CONNS,
			 BDEV_MAX_COUNT);
		return;
	}
	log_warn("fd limit: %llu (hard limit %llu), below the %llu that %d NBD and %d RPC "
		 "connections and %d file bdevs need; past it new clients wait for a free "
		 "descriptor (raise the hard limit: ulimit -Hn, or LimitNOFILE=)",
		 (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
		 (unsigned long long)need, NBD_MAX_CONNECTIONS, JSONRPC_MAX_CONNS,
		 BDEV_MAX_COUNT);
}

/* --- shutdown ---------------------------------------------------------- */

static void shutdown_done_exports(void *ctx, int status)
{
	bdev_delete_all();
	jsonrpc_stop();
	if (signal_watch) {
		reactor_fd_remove(signal_watch);
		signal_watch = NULL;
	}
	if (signal_fd >= 0) {
		close(signal_fd);
		signal_fd = -1;
	}
	reactor_timer_remove(clock_timer);
	clock_timer = NULL;
	if (status && !exit_code)
		log_warn("shutdown: some exports could not be stopped cleanly");
	reactors_stop();
}

static void shutdown_done_nbd(void *ctx)
{
	export_delete_all(shutdown_done_exports, NULL);
}

static void shutdown_done_workloads(void *ctx)
{
	nbd_shutdown(shutdown_done_nbd, NULL);
}

static void shutdown_begin(void *ctx)
{
	set_state(TARGET_SHUTDOWN);
	export_shutdown_begin();
	workload_stop_all(shutdown_done_workloads, NULL);
}

void target_shutdown(void)
{
	if (shutting_down)
		return;
	shutting_down = true;
	/* As a message, so that whoever asked (an RPC) finishes first. */
	if (reactor_send_msg(reactor_get(0), shutdown_begin, NULL) != 0) {
		log_error("out of memory starting shutdown");
		exit(1);
	}
}

static void startup_failed(void)
{
	exit_code = 1;
	target_shutdown();
}

static void signal_event(void *ctx, uint32_t events)
{
	struct signalfd_siginfo si;

	while (read(signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		log_info("%s: shutting down", strsignal((int)si.ssi_signo));
		target_shutdown();
	}
}

/* --- start-up ---------------------------------------------------------- */

static void announce_running(void)
{
	char nbd[HOST_MAX + 16];

	set_state(TARGET_RUNNING);
	if (opt.listen_tcp)
		snprintf(nbd, sizeof(nbd), "%s:%u", opt.host, bound_port);
	else
		strcpy(nbd, "-");
	printf("blktgt: running pid=%d rpc=%s nbd=%s unix=%s\n", (int)getpid(), opt.rpc_path,
	       nbd, opt.unix_path ? opt.unix_path : "-");
	fflush(stdout);
}

static void config_free(void)
{
	free(config.text);
	free(config.vals);
	free(config.scratch);
	memset(&config, 0, sizeof(config));
}

static void config_next(void);

static void config_call_done(void *ctx, int code, const char *text)
{
	const char *method = ctx;

	if (shutting_down) {
		/* A signal came during start-up: a call it cut short (a
		 * workload_run, say) is not a configuration error. */
		config_free();
		return;
	}
	if (code) {
		log_error("%s: call %u (%s) failed: %d: %s", opt.config, config.index, method,
			  code, text);
		config_free();
		startup_failed();
		return;
	}
	config_next();
}

/* Apply the calls one at a time, each after the previous has finished. */
static void config_next(void)
{
	const struct json_val *call, *k, *method = NULL, *params = NULL;

	if (shutting_down) {
		config_free();
		return;
	}
	if (config.left == 0) {
		config_free();
		announce_running();
		return;
	}
	call = config.next;
	config.next = json_next(call);
	config.left--;
	config.index++;
	if (call->type != JSON_OBJECT)
		goto bad;
	k = call + 1;
	for (uint32_t i = 0; i < call->count; i++, k = json_next(k + 1)) {
		const struct json_val **slot = json_str_eq(k, "method") ? &method
					     : json_str_eq(k, "params") ? &params : NULL;

		if (!slot || *slot)
			goto bad;
		*slot = k + 1;
	}
	if (!method || method->type != JSON_STRING || method->len == 0 ||
	    method->len > JSONRPC_MAX_METHOD_LEN || strlen(method->str) != method->len ||
	    (params && params->type != JSON_OBJECT))
		goto bad;
	jsonrpc_call(method->str, params, config_call_done, (void *)method->str);
	return;
bad:
	log_error("%s: call %u: each call is {\"method\": NAME, \"params\": {...}} and "
		  "nothing else", opt.config, config.index);
	config_free();
	startup_failed();
}

static int config_load(const char *path)
{
	size_t len = 0, used;
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		log_error("%s: %s", path, strerror(errno));
		return -errno;
	}
	config.text = malloc(JSON_MAX_CONFIG + 1);
	if (!config.text) {
		close(fd);
		return -ENOMEM;
	}
	while ((n = read(fd, config.text + len, JSON_MAX_CONFIG + 1 - len)) > 0) {
		len += (size_t)n;
		if (len > JSON_MAX_CONFIG)
			break;
	}
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc) {
		log_error("%s: %s", path, strerror(-rc));
		return rc;
	}
	if (len > JSON_MAX_CONFIG) {
		log_error("%s: larger than %d bytes", path, JSON_MAX_CONFIG);
		return -EFBIG;
	}
	config.vals = calloc(JSON_MAX_CONFIG_VALUES, sizeof(*config.vals));
	config.scratch = malloc(len + 1);
	if (!config.vals || !config.scratch)
		return -ENOMEM;
	rc = json_parse(config.text, len, config.vals, JSON_MAX_CONFIG_VALUES, config.scratch,
			&used);
	if (rc < 0) {
		log_error("%s: %s at byte %zu", path, json_status_str(rc), used);
		return -EINVAL;
	}
	for (; used < len; used++) {
		if (!strchr(" \t\r\n", config.text[used])) {
			log_error("%s: text after the JSON array", path);
			return -EINVAL;
		}
	}
	if (config.vals[0].type != JSON_ARRAY) {
		log_error("%s: must hold a JSON array of {\"method\", \"params\"} calls", path);
		return -EINVAL;
	}
	config.next = &config.vals[1];
	config.left = config.vals[0].count;
	return 0;
}

static void target_start(void *ctx)
{
	sigset_t mask;
	int rc;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (signal_fd < 0 ||
	    !(signal_watch = reactor_fd_add(signal_fd, EPOLLIN, signal_event, NULL))) {
		log_error("signalfd: %s", strerror(errno));
		startup_failed();
		return;
	}

	trace_clock_sync();
	clock_tick_start();

	set_state(TARGET_RPC);
	rc = jsonrpc_listen(opt.rpc_path);
	if (rc) {
		log_error("RPC socket %s: %s", opt.rpc_path, strerror(-rc));
		startup_failed();
		return;
	}

	set_state(TARGET_LISTEN);
	if (opt.listen_tcp) {
		rc = nbd_serve_tcp(opt.host, opt.port, &bound_port);
		if (rc) {
			log_error("NBD listener %s:%u: %s", opt.host, opt.port, strerror(-rc));
			startup_failed();
			return;
		}
	}
	if (opt.unix_path) {
		rc = nbd_serve_unix(opt.unix_path);
		if (rc) {
			log_error("NBD listener %s: %s", opt.unix_path, strerror(-rc));
			startup_failed();
			return;
		}
	}

	set_state(TARGET_CONFIG);
	if (opt.config) {
		rc = config_load(opt.config);
		if (rc) {
			config_free();
			startup_failed();
			return;
		}
	}
	config_next();
}

/* On stderr, as one log line: stdout carries only the "running" line (the CLI
 * contract), and an unbuffered stderr would split the line into pieces
 * that other writers to the same pipe (a tracer's output) can land in. */
static void announce_trace_ring(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return;
	trace_announce(f);
	if (fclose(f) == 0)
		log_raw(text, len);
	free(text);
}

/* A step on every reactor: once the walk is done, every reactor's loop is
 * running (thread__start has fired on each) before start-up goes on. */
static void reactor_started(struct reactor_foreach *it, void *ctx)
{
	reactor_foreach_continue(it, 0);
}

static void reactors_all_started(void *ctx, int status)
{
	target_start(ctx);
}

static void target_begin(void *ctx)
{
	if (reactor_for_each_thread(reactor_started, NULL, reactors_all_started) != 0) {
		log_error("out of memory");
		startup_failed();
	}
}

/* --- command line ------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: blktgt [-R N] [-l HOST:PORT | -l none] [-U NBD_UNIX_PATH]\n"
		"              [-i SECONDS] [-s RPC_SOCK] [-c CONFIG.json] [-e GROUP[:MASK],...]\n"
		"              [-h] [-V]\n"
		"\n"
		"A block target with USDT probes: null, malloc and file bdevs served over\n"
		"NBD, controlled by JSON-RPC (target/rpc.py).\n"
		"\n"
		"  -R, --reactors N          reactor threads, 1..%d (default %d)\n"
		"  -l, --listen HOST:PORT    NBD TCP listener (default %s:%d;\n"
		"                            port 0 picks one; 'none' for no TCP listener)\n"
		"  -U, --unix PATH           NBD unix socket listener (default none)\n"
		"  -i, --stall-timeout SECONDS\n"
		"                            close NBD clients still negotiating, and RPC\n"
		"                            clients that sent part of a request, after this\n"
		"                            long (default %d; 0: no limit)\n"
		"  -s, --rpc-socket PATH     JSON-RPC unix socket (default %s)\n"
		"  -c, --config FILE         JSON array of {\"method\", \"params\"} calls\n"
		"                            applied at start\n"
		"  -e, --trace GROUPS        record trace ring groups (bdev,nbd,...; all; help\n"
		"                            lists them); timestamps: the TSC where the kernel\n"
		"                            clock uses it, else CLOCK_MONOTONIC\n"
		"                            (BLKTGT_TRACE_CLOCK=monotonic|tsc chooses)\n"
		"  -h, --help                this help\n"
		"  -V, --version             print probekit's version and exit\n"
		"\n"
		"Once running it prints one line:\n"
		"  blktgt: running pid=PID rpc=RPC_SOCK nbd=HOST:PORT unix=PATH_OR_-\n"
		"SIGINT, SIGTERM or the target_shutdown RPC stop it cleanly (exit 0).\n"
		"\n"
		"examples:\n"
		"  blktgt                        # NBD on 127.0.0.1:10809, RPC on the default socket\n"
		"  blktgt -R 4 -l 127.0.0.1:0    # four reactors, any free NBD port\n"
		"  blktgt -c bdevs.json -e bdev  # bdevs from a file; record bdev trace events\n",
		REACTOR_MAX, DEFAULT_THREADS, DEFAULT_NBD_HOST, DEFAULT_NBD_PORT,
		NBD_HANDSHAKE_LIMIT_DEFAULT, DEFAULT_RPC_SOCK);
}

__attribute__((format(printf, 1, 2), noreturn))
static void bad_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("blktgt: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (try -h)\n", stderr);
	exit(2);
}

/* A whole decimal number in [min, max], nothing else. */
static bool parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!*s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

static void parse_listen(const char *arg)
{
	const char *colon = strrchr(arg, ':');
	size_t hlen;
	unsigned long port;

	if (strcmp(arg, "none") == 0) {
		opt.listen_tcp = false;
		return;
	}
	if (!colon || !parse_uint(colon + 1, 0, 65535, &port))
		bad_usage("-l %s: expected HOST:PORT with PORT 0..65535, or none", arg);
	hlen = (size_t)(colon - arg);
	if (hlen >= 2 && arg[0] == '[' && arg[hlen - 1] == ']') {
		arg++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen > HOST_MAX)
		bad_usage("-l: host must be 1..%d characters", HOST_MAX);
	memcpy(opt.host, arg, hlen);
	opt.host[hlen] = '\0';
	opt.port = (uint16_t)port;
}

static void check_path(const char *what, const char *path)
{
	if (!*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		bad_usage("%s %s: a socket path must be 1..%zu bytes", what, path,
			  sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
}

/* A letter blktgt once gave another meaning, and what to write now: each
 * of these means one thing across probekit's commands (ARCHITECTURE.md,
 * "Conventions"), so an old command line is refused, never misread. */
static const char *const old_letters[][2] = {
	{ "t", "-t THREADS is now -R N (--reactors); -t is blktgt-rpc's timeout" },
	{ "L", "-L HOST:PORT is now -l HOST:PORT (--listen), as in probekit-exporter; "
	       "-L is the tools' --linear" },
	{ "H", "-H SECONDS is now -i SECONDS (--stall-timeout); -H is probekit-usdtcount's "
	       "--histogram" },
};

static void refuse_old_letter(int c)
{
	for (size_t i = 0; i < sizeof(old_letters) / sizeof(old_letters[0]); i++)
		if (old_letters[i][0][0] == c)
			bad_usage("%s", old_letters[i][1]);
}

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reactors", required_argument, NULL, 'R' },
		{ "listen", required_argument, NULL, 'l' },
		{ "unix", required_argument, NULL, 'U' },
		{ "stall-timeout", required_argument, NULL, 'i' },
		{ "rpc-socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "trace", required_argument, NULL, 'e' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long v;
	int c;

	opterr = 0;
	/* t, L and H take no argument here: whatever follows, they are refused. */
	while ((c = getopt_long(argc, argv, ":R:l:U:s:c:e:i:hVtLH", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
		case 'L':
		case 'H':
			refuse_old_letter(c);
			break;
		case 'R':
			if (!parse_uint(optarg, 1, REACTOR_MAX, &v))
				bad_usage("-R %s: expected a number of reactor threads, 1..%d",
					  optarg, REACTOR_MAX);
			opt.threads = (unsigned)v;
			break;
		case 'l':
			parse_listen(optarg);
			break;
		case 'U':
			check_path("-U", optarg);
			opt.unix_path = optarg;
			break;
		case 's':
			check_path("-s", optarg);
			opt.rpc_path = optarg;
			break;
		case 'c':
			opt.config = optarg;
			break;
		case 'i':
			if (!parse_uint(optarg, 0, NBD_HANDSHAKE_LIMIT_MAX, &v))
				bad_usage("-i %s: expected seconds, 0..%d (0: no limit)", optarg,
					  NBD_HANDSHAKE_LIMIT_MAX);
			nbd_set_handshake_limit((unsigned)v);
			jsonrpc_set_stall_limit((unsigned)v);
			break;
		case 'e':
			c = trace_parse_enable(optarg);
			if (c != 0)
				exit(c > 0 ? 0 : 2);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("blktgt (probekit) %s\n", PROBEKIT_VERSION);
			exit(0);
		case ':':
			bad_usage("-%c needs an argument", optopt);
		default:
			/* A long option: unknown, or given an argument it does not take. */
			if (strncmp(argv[optind - 1], "--", 2) == 0)
				bad_usage("unknown option %s", argv[optind - 1]);
			bad_usage("unknown option -%c", optopt);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (trace_clock_check())
		exit(2);
	if (bdev_batch_cap_from_env())
		exit(2);
}

int main(int argc, char **argv)
{
	sigset_t mask;
	int rc;

	states_init();
	start_ns = reactor_now_ns();
	set_state(TARGET_NONE);
	parse_args(argc, argv);
	set_state(TARGET_INIT);

	/* Before any thread exists, so that every thread inherits the mask
	 * and only reactor 0's signalfd sees SIGINT/SIGTERM. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (log_start() != 0)
		log_warn("log lines go straight to stderr: no writer thread");
	atexit(log_stop);
	fd_limit_raise();

	set_state(TARGET_THREADS);
	rc = reactors_init(opt.threads);
	if (rc) {
		log_error("cannot create %u reactors: %s", opt.threads, strerror(-rc));
		return 1;
	}
	rc = trace_init(opt.threads, 0);
	if (rc) {
		log_error("trace ring: %s", strerror(-rc));
		return 1;
	}
	announce_trace_ring();
	if (reactor_send_msg(reactor_get(0), target_begin, NULL) != 0) {
		log_error("out of memory");
		return 1;
	}
	rc = reactors_run();
	reactors_fini();
	if (trace_fini())
		log_info("trace ring kept: %s", trace_dump_command());
	if (rc && !exit_code)
		exit_code = 1;
	if (exit_code == 0)
		log_info("exiting cleanly");
	log_stop();
	return exit_code;
}
