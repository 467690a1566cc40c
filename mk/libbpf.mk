# SPDX-License-Identifier: BSD-2-Clause
# libbpf CO-RE tools (libbpf/): iolatency, iosize, funclat, qdepth, rpclat,
# nbdtime, and the generic usdtlat and usdtcount, as
# $(O)/bin/probekit-<tool>.  Each tool is three files, as in libbpf-tools:
# <tool>.h (structs shared with BPF), <tool>.bpf.c (BPF programs and maps)
# and <tool>.c (user space), plus the helpers every tool links.
#
#   libbpf/<tool>.bpf.c --clang -target bpf--> $(O)/obj/libbpf/<tool>.bpf.o
#   <tool>.bpf.o --bpftool gen skeleton--> $(O)/gen/libbpf/<tool>.skel.h
#   libbpf/<tool>.c + skeleton + helpers --cc -lbpf--> $(O)/bin/probekit-<tool>
#
# vmlinux.h is generated from the target kernel's BTF (this machine's; for
# make ARCH=arm64, Debian's arm64 kernel image's), so no kernel headers
# are needed, at build time or at run time (libbpf/probekit.bpf.h says why
# the tools do not even need BTF at run time).

LIBBPF_TOOLS := iolatency iosize funclat qdepth rpclat nbdtime usdtlat usdtcount
# The helpers' rooms, one concern each, each with its own header (libbpf/README.md).
TOOL_ROOMS := tool_options tool_priv tool_target tool_attach tool_drain tool_loop tool_main
LIBBPF_HELPERS := histogram $(TOOL_ROOMS) blktgt_io

BPF_CLANG   ?= clang
BPFTOOL     ?= bpftool
LLVM_STRIP  ?= llvm-strip
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux

LIBBPF_GEN := $(O)/gen/libbpf
LIBBPF_OBJ := $(O)/obj/libbpf
LIBBPF_BINS := $(addprefix $(O)/bin/probekit-,$(LIBBPF_TOOLS))
EXPORTER := $(O)/bin/probekit-exporter

# The BPF programs' architecture (bpf_tracing.h's register names, the
# pt_regs layout of vmlinux.h) is the one the tools are built for: the
# compiler's, not this machine's (make ARCH=arm64 cross-builds).
BPF_ARCH := $(shell $(CC) -dumpmachine | sed -e 's/-.*//' -e 's/x86_64/x86/' \
	-e 's/aarch64/arm64/' -e 's/powerpc64le/powerpc/' -e 's/s390x/s390/' -e 's/riscv64/riscv/')
ifneq ($(SYSROOT),)
# A cross-build: the BPF side takes the target's headers too (libbpf's
# bpf_helpers.h, asm/errno.h), from the arm64 userland it links against,
# and the arm64 kernel's types from that kernel's BTF, which
# scripts/arm64.sh takes out of the userland's kernel image.
BPF_SYS_INCLUDES = -idirafter $(SYSROOT)/usr/include/aarch64-linux-gnu \
	-idirafter $(SYSROOT)/usr/include
VMLINUX_BTF := $(SYSROOT)/../vmlinux.btf
else
# -target bpf has no system include directories of its own; lend it the
# host's (for asm/errno.h, which usdt.bpf.h pulls in via linux/errno.h).
# Expanded only when a BPF object is built, so other targets skip the
# clang call.
BPF_SYS_INCLUDES = $(shell $(BPF_CLANG) -v -E - </dev/null 2>&1 | \
	sed -n '/<...> search starts here:/,/End of search list./s|^ \(/.*\)|-idirafter \1|p')
endif
BPF_CFLAGS = -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Wall $(WERROR_FLAGS) $(PREFIX_MAP) \
	-I$(LIBBPF_GEN) -I$(O)/gen -Ilibbpf -Iinclude $(BPF_SYS_INCLUDES)
LIBBPF_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(WARN) $(BASE_CFLAGS) -I$(LIBBPF_GEN) \
	-I$(O)/gen -Ilibbpf -Iinclude $(SAN_CFLAGS) $(EXTRA_CFLAGS)
LIBBPF_LDLIBS := -lbpf -lelf -lz

.PHONY: libbpf
libbpf: $(LIBBPF_BINS) $(EXPORTER)
# A kernel without BTF cannot build them; blktgt and the rest still build,
# and the libbpf tests then fail saying the tools are not built.  Nor can
# a cross-build without arm64 libraries (the Makefile says so).
ifeq ($(CROSS_LIBS),0)
else ifneq ($(wildcard $(VMLINUX_BTF)),)
all: $(LIBBPF_BINS) $(EXPORTER)
else
$(info libbpf: no $(VMLINUX_BTF) (CONFIG_DEBUG_INFO_BTF); the libbpf tools are not built)
endif

$(LIBBPF_GEN) $(LIBBPF_OBJ):
	$(Q)mkdir -p $@

# The kernel's types, from its BTF (CONFIG_DEBUG_INFO_BTF).
$(LIBBPF_GEN)/vmlinux.h: | $(LIBBPF_GEN)
	$(call msg,BTF,$@)
	$(Q)test -r $(VMLINUX_BTF) || { echo "libbpf: $(VMLINUX_BTF) is missing:" \
		"the libbpf tools need a kernel with CONFIG_DEBUG_INFO_BTF" >&2; exit 1; }
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@

# -g keeps the BTF that CO-RE and the skeleton need; llvm-strip -g then
# drops only the DWARF.
$(LIBBPF_OBJ)/%.bpf.o: libbpf/%.bpf.c $(LIBBPF_GEN)/vmlinux.h $(O)/gen/probekit_limits.h | $(LIBBPF_OBJ)
	$(call msg,BPF,$@)
	$(Q)$(BPF_CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@
	$(Q)$(LLVM_STRIP) -g $@

$(LIBBPF_GEN)/%.skel.h: $(LIBBPF_OBJ)/%.bpf.o | $(LIBBPF_GEN)
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(LIBBPF_OBJ)/%.o: libbpf/%.c $(O)/.config $(O)/gen/probekit_limits.h | $(LIBBPF_OBJ)
	$(call msg,CC,$@)
	$(Q)$(CC) $(LIBBPF_CFLAGS) -MMD -MP -c $< -o $@

# A tool's user space includes its skeleton: make that explicit.
$(foreach t,$(LIBBPF_TOOLS),$(eval $(LIBBPF_OBJ)/$(t).o: $(LIBBPF_GEN)/$(t).skel.h))

$(LIBBPF_BINS): $(O)/bin/probekit-%: $(LIBBPF_OBJ)/%.o $(addprefix $(LIBBPF_OBJ)/,$(addsuffix .o,$(LIBBPF_HELPERS))) | $(O)/bin
	$(call msg,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBBPF_LDLIBS)

# The generic tools read any binary's notes through the one C reader,
# mk/usdt.mk's archive (named here: that file is read after this one),
# and share the site resolution and attach code.
LIBBPF_USDT_TOOLS := usdtlat usdtcount
$(LIBBPF_USDT_TOOLS:%=$(O)/bin/probekit-%): $(LIBBPF_OBJ)/usdt_sites.o \
	$(O)/lib/libprobekit_usdt.a
$(LIBBPF_OBJ)/usdt_sites.o $(LIBBPF_USDT_TOOLS:%=$(LIBBPF_OBJ)/%.o): \
	LIBBPF_CFLAGS += -Iprobes/usdt

# probekit-exporter: three files of user space (main and attach, the
# scrape's text, HTTP), linked with libmicrohttpd, the generic tools' site
# finder (usdt_sites.o: a process's libraries) and the USDT note reader
# (mk/usdt.mk's archive, named here in full: that file is read after
# this one).  It reads include/io_batch.h (the io__batch
# record) and include/blktgt_states.h (the I/O type names).
EXPORTER_OBJS := $(addprefix $(LIBBPF_OBJ)/,exporter.o exporter_render.o \
	exporter_http.o)
$(EXPORTER_OBJS): LIBBPF_CFLAGS += -Iprobes/usdt
$(LIBBPF_OBJ)/exporter.o: $(LIBBPF_GEN)/exporter.skel.h
$(EXPORTER): $(EXPORTER_OBJS) $(LIBBPF_OBJ)/usdt_sites.o $(addprefix $(LIBBPF_OBJ)/,$(addsuffix .o,$(LIBBPF_HELPERS))) \
		$(O)/lib/libprobekit_usdt.a | $(O)/bin
	$(call msg,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBBPF_LDLIBS) -lmicrohttpd -lm

# Keep the objects and skeletons between the pattern rules.
.SECONDARY: $(LIBBPF_TOOLS:%=$(LIBBPF_OBJ)/%.bpf.o) \
	$(LIBBPF_TOOLS:%=$(LIBBPF_GEN)/%.skel.h) \
	$(LIBBPF_OBJ)/exporter.bpf.o $(LIBBPF_GEN)/exporter.skel.h \
	$(EXPORTER_OBJS) \
	$(LIBBPF_TOOLS:%=$(LIBBPF_OBJ)/%.o) $(LIBBPF_HELPERS:%=$(LIBBPF_OBJ)/%.o) \
	$(LIBBPF_OBJ)/usdt_sites.o

-include $(wildcard $(LIBBPF_OBJ)/*.d)
