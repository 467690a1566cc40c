# SPDX-License-Identifier: BSD-2-Clause
# The suite on another Debian release's userland, in a cached chroot on
# this kernel (scripts/stack.sh says how):
#
#   make stack STACK=trixie                  make test there
#   make stack STACK=sid STACK_CMD='...'     any command, in the tree's copy

.PHONY: stack
stack:
	$(Q)scripts/stack.sh $(if $(STACK),'$(STACK)') $(if $(STACK_CMD),'$(STACK_CMD)')
