# SPDX-License-Identifier: BSD-2-Clause
# probekit's version: the one line in VERSION at the top of the tree.
#
# The C programs get it at build time, from a header generated here, so a
# change to VERSION rebuilds exactly the objects that print it.  Scripts
# read the file at run time, from ../VERSION beside their real directory:
# the checkout's top, or PREFIX/share/probekit, where make install keeps
# the checkout's tree.  $(O)/share/probekit is laid out as
# PREFIX/share/probekit, and make install copies it there whole.

PROBEKIT_VERSION_H := $(O)/gen/probekit_version.h
PROBEKIT_VERSION_SHARE := $(O)/share/probekit/VERSION

all: $(PROBEKIT_VERSION_SHARE)

# A C string is made of it, so take only what a version is made of.
$(PROBEKIT_VERSION_H): VERSION | $(O)/gen
	$(call msg,GEN,$@)
	$(Q)test "$$(wc -l <$<)" = 1 && grep -Eqx '[0-9A-Za-z.+~-]{1,32}' $< || \
		{ echo "$<: must be one line, a version such as 0.3.0" >&2; exit 1; }
	$(Q)printf '/* Generated from VERSION by mk/version.mk. */\n#define PROBEKIT_VERSION "%s"\n' \
		"$$(cat $<)" >$@

$(PROBEKIT_VERSION_SHARE): VERSION
	$(call msg,INSTALL,$@)
	$(Q)install -D -m 0644 $< $@

# The objects that print it; -MMD records the header for the next build,
# this makes sure the first build has it.
$(O)/obj/target/target.o $(O)/obj/libbpf/tool_options.o: $(PROBEKIT_VERSION_H)
