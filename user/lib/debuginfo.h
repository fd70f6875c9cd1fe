/* Separate debug files (what distributions ship in -dbg/-dbgsym packages), found by build-id or debuglink. */
#ifndef MEMLEAK_AI_DEBUGINFO_H
#define MEMLEAK_AI_DEBUGINFO_H

#include <gelf.h>

/* Where debug files are searched when no --debug-dir is given. */
#define ML_DEBUG_DIR_DEFAULT "/usr/lib/debug"

/*
 * Open the separate debug file of the object elf (read from path, as the target process names it), looked
 * up inside the target's root (/proc/PID/root; pid 0, or a process gone: this machine's root) under dir:
 *   DIR/.build-id/xx/yyyy.debug, whose own build-id must match;
 *   then the .gnu_debuglink name in the object's directory, in its .debug/ and in DIR/<object's directory>,
 *   whose CRC-32 must match.
 * A candidate bigger than 4 GiB, not an ELF or not matching is passed over. Returns an fd (O_RDONLY |
 * O_CLOEXEC), -ENOENT when there is none, -ENOMEM.
 */
int ml_debug_file_open(int pid, const char *dir, Elf *elf, const char *path);

/* The object's GNU build-id note, copied into id (up to max bytes); its length, or 0 when it has none. */
size_t ml_elf_build_id(Elf *elf, unsigned char *id, size_t max);

#endif
