/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The gdb helpers, carried inside blktgt: a .debug_gdb_scripts entry of
 * kind 4 (Python text) holds gdb/blktgt.py whole, so a binary brings the
 * helpers that match its own structs.  gdb runs them when it loads the
 * binary, once its auto-load safe-path allows it (README.md, "Debugging
 * with gdb").  The entry is one string: the script must hold no NUL byte.
 */
	.pushsection ".debug_gdb_scripts", "MS", @progbits, 1
	.byte 4
	.ascii "gdb.inlined-script.blktgt\n"
	.incbin "gdb/blktgt.py"
	.byte 0
	.popsection
	.section .note.GNU-stack, "", @progbits
