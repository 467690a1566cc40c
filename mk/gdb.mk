# SPDX-License-Identifier: BSD-2-Clause
# The gdb helpers (gdb/blktgt.py), linked into blktgt as a .debug_gdb_scripts
# entry so that gdb loads them with the binary.  The object is a prerequisite
# of the link, which takes all of them ($^).
GDB_SECTION_O := $(O)/obj/gdb/section.o

$(O)/obj/gdb:
	$(Q)mkdir -p $@

$(GDB_SECTION_O): gdb/section.S gdb/blktgt.py | $(O)/obj/gdb
	$(call msg,AS,$@)
	$(Q)$(CC) -c $< -o $@

$(TARGET): $(GDB_SECTION_O)
