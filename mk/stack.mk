# SPDX-License-Identifier: BSD-2-Clause
# The suite on another Debian release's userland, in a cached chroot on
# this kernel (scripts/stack.sh says how):
#
#   make stack STACK=trixie                  make test there
#   make stack STACK=sid STACK_CMD='...'     any command, in the tree's copy
#   make stack-prepare STACK=trixie          only build or refresh the chroot
#                                            and install the deps there
#   make stack-check STACK=NAME              the suite as CI runs it in
#                                            NAME's chroot: make check,
#                                            less STACK_LEAVE_OUT, warnings
#                                            errors unless NAME is in
#                                            STACKS_WARN_ONLY
#
# A second run of a stack whose lock another run holds refuses at once;
# STACK_WAIT=1 waits for it instead (stack-prepare always waits).

.PHONY: stack stack-prepare stack-check stack-leave-out ci-stacks

stack:
	$(Q)scripts/stack.sh $(if $(STACK_WAIT),--wait) $(if $(STACK),'$(STACK)') \
		$(if $(STACK_CMD),'$(STACK_CMD)')

stack-prepare:
	$(Q)scripts/stack.sh --prepare $(if $(STACK),'$(STACK)')

# What CI's chroot runs (.ci/run) leave out of make check, to fit three
# suites in CI's time: each is a stage of make check (a make target) or a
# pytest node id prefix (a test file, or FILE::TEST).  Only what exercises
# no tracer, library or packaging difference between the stacks belongs
# here: the target's own behaviour, which the host's make test checks.
# doc/supported-systems.md lists the same (tests/scripts/test_stack.py checks).
STACK_LEAVE_OUT = check-asan \
		  target/test_target_rpc_load.py \
		  debian/test_cleanroom.py \
		  scripts/test_arm64.py \
		  bench/test_bench_stacks.py

# The chroot stacks .ci/run runs beside the host's: Debian 13.  Unstable's
# whole suite passes too, but three whole suites one after another no
# longer fit CI's 90 minutes on a 2-core machine (the last such run was
# stopped at 90, in Debian 13's): unstable is run by hand before a
# landing, make stack-check STACK=sid (doc/supported-systems.md, "CI,
# each stack", gives the times and its last result).
CI_STACKS = trixie
# Of those, the stacks whose compiler warnings make stack-check STACK=NAME
# (.ci/run's) reports without failing on them: unstable's compilers move.
# Every other stack, and the host's make check, builds with WERROR=1.
STACKS_WARN_ONLY = sid
STACK_WERROR = $(if $(filter $(STACK),$(STACKS_WARN_ONLY)),0,1)

stack-check:
	$(Q)for t in $(filter-out $(STACK_LEAVE_OUT),$(CHECK_STAGES)); do \
		$(MAKE) --no-print-directory $$t CHECK_WERROR=$(STACK_WERROR) \
		CHECK_DESELECT='$(filter-out $(CHECK_STAGES),$(STACK_LEAVE_OUT))' || exit; \
	done

stack-leave-out:
	@echo $(STACK_LEAVE_OUT)

ci-stacks:
	@echo $(CI_STACKS)
