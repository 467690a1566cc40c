# SPDX-License-Identifier: BSD-2-Clause
# make install / make uninstall, as a distribution lays probekit out.
#
#   make install [PREFIX=/usr/local] [DESTDIR=STAGE] [O=DIR]
#   make uninstall [PREFIX=...] [DESTDIR=...]
#
# What goes where (doc/install.md, "Installing from a checkout"):
#   $(BINDIR)         every command in $(O)/bin, under its name there: the
#                     compiled ones (blktgt, the libbpf tools) as files,
#                     blktgt keeping its symbols (uprobe tools, the gdb
#                     helpers and probekit-structs read them); the scripts
#                     as relative symlinks into $(PKGDATADIR)
#   $(PKGLIBEXECDIR)  helpers in $(O)/libexec/probekit, the same way (the
#                     wrapper's probekit-scan, mk/wrapper.mk; its sources
#                     in wrapper/ are not installed)
#   $(PKGDATADIR)     the scripts in the tree they have in the checkout
#                     (wrapper/, probes/ with probelib, bcc/ with its
#                     modules, target/), bt/, the catalog, the tool
#                     specs (specs/*.toml, read by probelib.toolspec),
#                     VERSION, the structs made at build time, and
#                     probekit.mk and include/probekit_batch.h for other
#                     projects
#                     (examples/quickstart/), and cmake/, the CMake
#                     package that runs probekit.mk (probes/cmake/), where
#                     find_package(probekit) looks under PREFIX
#   $(MAN8DIR)        man/*.8, and a link for each other command a page names
#   $(PKGCONFIGDIR)   probekit.pc (probes/probekit.pc.in with PREFIX), so that
#                     pkg-config names probekit.mk, the generator and the
#                     headers; arch-independent, so under share/
#   $(GDBAUTOLOADDIR) the gdb helpers, as blktgt's auto-load script
#
# Every rule is generic: a command added to $(O)/bin, to SCRIPT_LINKS or to
# $(O)/libexec/probekit installs with no edit here.  Because the scripts keep
# their checkout tree under $(PKGDATADIR), each finds what it shares (its
# modules, VERSION at the top of the tree) by the same relative path from
# its own real location, installed or not, and the install can be moved
# (DESTDIR, a package) without rewriting a file.
#
# install records every path it writes outside $(PKGDATADIR) in
# $(PKGDATADIR)/installed, so uninstall removes exactly those, whatever the
# build directory holds by then.

PREFIX         ?= /usr/local
BINDIR         ?= $(PREFIX)/bin
PKGDATADIR     ?= $(PREFIX)/share/probekit
PKGLIBEXECDIR  ?= $(PREFIX)/libexec/probekit
MAN8DIR        ?= $(PREFIX)/share/man/man8
GDBAUTOLOADDIR ?= $(PREFIX)/share/gdb/auto-load
PKGCONFIGDIR   ?= $(PREFIX)/share/pkgconfig
BASHCOMPDIR    ?= $(PREFIX)/share/bash-completion/completions

# Files of the tree that no command in $(O)/bin names.  A script's shared
# modules need no list: the .py files and Python packages (directories
# with __init__.py) beside it go with it.  probelib reads the register
# table (probes/usdt/registers) at run time.
INSTALL_TREE_FILES = bt/*.bt probes/*.d probes/nop5/sys/sdt.h include/probekit_batch.h specs/*.toml VERSION \
	probes/usdt/registers

.PHONY: install uninstall install-check-prefix

install-check-prefix:
	@case '$(PREFIX)' in /*) ;; *) echo "install: PREFIX '$(PREFIX)' is not an absolute path; give one such as /usr/local" >&2; exit 1 ;; esac
	@case '$(DESTDIR)' in ''|/*) ;; *) echo "install: DESTDIR '$(DESTDIR)' is not an absolute path; give one such as /tmp/stage" >&2; exit 1 ;; esac

install: install-check-prefix all
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)set -e; \
	stage='$(DESTDIR)'; data="$$stage$(PKGDATADIR)"; top='$(CURDIR)'; \
	list="$$data/installed.tmp"; \
	mkdir -p "$$data" "$$stage$(BINDIR)" "$$stage$(MAN8DIR)"; : > "$$list"; \
	put_tree() { \
		install -D -m "$$(stat -c %a "$$top/$$1")" "$$top/$$1" "$$data/$$1"; \
	}; \
	put_cmds() { \
		dir=$$1; dest=$$2; \
		for f in "$$dir"/*; do \
			[ -e "$$f" ] || continue; name=$${f##*/}; \
			if [ -L "$$f" ]; then \
				src=$$(readlink -f "$$f"); rel=$${src#"$$top"/}; \
				[ "$$rel" != "$$src" ] || { echo "install: $$f links outside the checkout ($$src)" >&2; exit 1; }; \
				put_tree "$$rel"; \
				srcdir=$${rel%/*}; \
				for m in "$$srcdir"/*.py "$$srcdir"/*/__init__.py; do \
					[ -f "$$m" ] || continue; \
					case $$m in */__init__.py) \
						for p in "$${m%/__init__.py}"/*.py; do put_tree "$$p"; done ;; \
					*) put_tree "$$m" ;; esac; \
				done; \
				ln -sfr "$$data/$$rel" "$$stage$$dest/$$name"; \
			else \
				install -m 0755 "$$f" "$$stage$$dest/$$name"; \
			fi; \
			echo "$$dest/$$name" >> "$$list"; \
		done; \
	}; \
	put_cmds '$(O)/bin' '$(BINDIR)'; \
	if [ -d '$(O)/libexec/probekit' ]; then \
		mkdir -p "$$stage$(PKGLIBEXECDIR)"; \
		put_cmds '$(O)/libexec/probekit' '$(PKGLIBEXECDIR)'; \
		echo '$(PKGLIBEXECDIR)/' >> "$$list"; \
	fi; \
	for f in $(INSTALL_TREE_FILES); do put_tree "$$f"; done; \
	install -m 0644 probes/probekit.mk "$$data/probekit.mk"; \
	install -D -m 0644 -t "$$data/cmake" probes/cmake/*.cmake; \
	mkdir -p "$$stage$(PKGCONFIGDIR)"; \
	pcdata='$(PKGDATADIR)'; case $$pcdata in '$(PREFIX)'/*) \
		pcdata="\$${prefix}/$${pcdata#'$(PREFIX)'/}" ;; esac; \
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e "s|@PKGDATADIR@|$$pcdata|g" \
		-e "s|@VERSION@|$$(cat VERSION)|g" probes/probekit.pc.in \
		> "$$stage$(PKGCONFIGDIR)/probekit.pc"; \
	echo "$(PKGCONFIGDIR)/probekit.pc" >> "$$list"; \
	mkdir -p "$$stage$(BASHCOMPDIR)"; \
	for f in $(COMPLETIONS); do \
		install -m 0644 "$$f" "$$stage$(BASHCOMPDIR)/"; \
		echo "$(BASHCOMPDIR)/$${f##*/}" >> "$$list"; \
	done; \
	if [ -d '$(O)/share/probekit' ]; then cp -R '$(O)/share/probekit/.' "$$data/"; fi; \
	for page in man/*.8; do \
		[ -f "$$page" ] || continue; \
		install -m 0644 "$$page" "$$stage$(MAN8DIR)/"; \
		echo "$(MAN8DIR)/$${page##*/}" >> "$$list"; \
		for alias in $$(sed -n '/^\.SH NAME/{n;s/ \\-.*//;s/,//g;p;q}' "$$page"); do \
			[ "$$alias.8" = "$${page##*/}" ] && continue; \
			ln -sf "$${page##*/}" "$$stage$(MAN8DIR)/$$alias.8"; \
			echo "$(MAN8DIR)/$$alias.8" >> "$$list"; \
		done; \
	done; \
	gdbdir="$(GDBAUTOLOADDIR)$(BINDIR)"; \
	install -D -m 0644 gdb/blktgt.py "$$stage$$gdbdir/blktgt-gdb.py"; \
	install -D -m 0644 gdb/blktgt.py "$$data/gdb/blktgt.py"; \
	echo "$$gdbdir/blktgt-gdb.py" >> "$$list"; \
	find "$$data" -name __pycache__ -prune -exec rm -rf {} +; \
	mv "$$list" "$$data/installed"

# Only what the record names, then the package's own directories.
uninstall: install-check-prefix
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)set -e; stage='$(DESTDIR)'; data="$$stage$(PKGDATADIR)"; \
	[ -f "$$data/installed" ] || { echo "uninstall: no probekit install in $$stage$(PREFIX) ($$data/installed is missing); give the PREFIX and DESTDIR it was installed with" >&2; exit 1; }; \
	while IFS= read -r p; do \
		case $$p in /*) ;; *) continue ;; esac; \
		case $$p in */) rm -rf "$$stage$$p" ;; *) rm -f "$$stage$$p" ;; esac; \
	done < "$$data/installed"; \
	rm -rf "$$data"; \
	rmdir -p --ignore-fail-on-non-empty "$$stage$(GDBAUTOLOADDIR)$(BINDIR)" 2>/dev/null || true

# make deb: the Debian package (debian/), built by dpkg-buildpackage from a
# copy of the tracked files in $(O)/deb/src, because dh_auto_clean runs make
# clean, which would wipe the checkout's build directory.  The .deb is left
# in $(O)/deb, and lintian must find no error in it; the last line names
# the package.  lintian run as root (make deps, CI) says that it does not
# recommend it: that line is dropped, since a package build needs no root
# here (Rules-Requires-Root: no) and lintian only reads the files.
.PHONY: deb
deb:
	$(Q)command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null && command -v lintian >/dev/null || \
		{ echo "deb: dpkg-buildpackage, dh and lintian are needed; run 'make deps' (packages dpkg-dev, debhelper, lintian)" >&2; exit 1; }
	$(Q)git rev-parse --is-inside-work-tree >/dev/null 2>&1 || \
		{ echo "deb: the package is built from the tracked files, and $(CURDIR) is not a git checkout" >&2; exit 1; }
	$(Q)rm -rf $(O)/deb && mkdir -p $(O)/deb/src
	$(Q)git ls-files -z | tar --null -T - -cf - | tar -xf - -C $(O)/deb/src
	$(call msg,DPKG,$(O)/deb)
	$(Q)cd $(O)/deb/src && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u O \
		dpkg-buildpackage -us -uc -b >../build.log 2>&1 || \
		{ tail -n 30 ../build.log >&2; echo "deb: dpkg-buildpackage failed; the whole log is $(O)/deb/build.log" >&2; exit 1; }
	$(call msg,LINTIAN,$(O)/deb)
	$(Q)lintian --fail-on error $(O)/deb/*.deb 2>$(O)/deb/lintian.err; rc=$$?; \
		grep -vx 'running with root privileges is not recommended!' $(O)/deb/lintian.err >&2; \
		exit $$rc
	$(Q)for f in $(abspath $(O))/deb/probekit_*.deb; do echo "deb: built $$f"; done
