/*
 * Snapshot records: what vramguard saw, written down so that it can be diagnosed again
 * elsewhere (`--record FILE`, `--replay FILE`, docs/recording.md) and so that unit tests can
 * replay the lifecycle lab's real hosts (tests/lifecycles/snapshots/).
 *
 * The format is versioned, line-based text, one field a line. It carries every field the rules,
 * the leftover model and the clean planner read: the driver's GPU list (MIG devices, process
 * lists, errors, known bits) and the process table (known bits, NSpid, the allow-listed
 * environment, device minors and how they are held, kin, unread processes, PID namespace,
 * access, activity), plus the snapshot's own fields. It carries no holdings and no per-GPU sums:
 * reading rebuilds the snapshot through vg_snap_assemble(), so the join is recomputed by the code
 * that reads it, never trusted from the file. Unknown stays unknown: known bits are recorded, and
 * a field equal to zero (or a NULL string) is left out and reads back as zero.
 *
 *     vramguard-snapshot 1          the header: the format and its version
 *     taken_at 1764806400.000000000 a field of the current object: KEY VALUE
 *     gpu                           an object of its own: the fields after it are its
 *     name "NVIDIA H100"            strings in double quotes, \\ \" and \xHH escaped
 *     known name,uuid,minor         bit sets by name (a bit without a name as 0xHEX)
 *     end                           the last line: a record cut short is an error
 *
 * Lines starting with '#' are comments, for people and for tools that annotate a record (the
 * lifecycle lab notes which process had which role); the reader skips them.
 *
 * Reading is strict: an unknown key, a malformed value, a field given twice, an object out of
 * place or a missing header or end fails with one line naming the line number. Writing then
 * reading then writing gives the same bytes.
 *
 * Ownership: the snapshot a read returns is the caller's (vg_snap_free()); its replay field
 * names the file. Writers only read the snapshot.
 */
#ifndef VG_MODEL_RECORD_H
#define VG_MODEL_RECORD_H

#include <stddef.h>

#include "model/snapshot.h"
#include "util/buf.h"
#include "util/err.h"

#define VG_SNAP_RECORD_VERSION 1
/* The largest record read (a host of thousands of holders fits many times over). */
#define VG_SNAP_RECORD_MAX ((size_t)64 << 20)

/* Append snap's record to out. 0, or -ENOMEM / -E2BIG with err set. */
int vg_snap_record_write(const struct vg_snapshot *snap, struct vg_buf *out, struct vg_err *err);
/* The same into the file path (created or replaced, mode 0644 before the umask). 0 or a
 * negative errno with err set ("cannot write 'PATH': ..."). */
int vg_snap_record_save(const struct vg_snapshot *snap, const char *path, struct vg_err *err);

/* Rebuild a snapshot from the len bytes of a record; name is the file for messages
 * ("NAME:LINE: ..."). 0 with *out set, or -EINVAL (malformed) / -ENOMEM with err set and *out
 * NULL. */
int vg_snap_record_parse(const char *text, size_t len, const char *name, struct vg_snapshot **out,
                         struct vg_err *err);
/* Read the record file path (a regular file) and rebuild its snapshot, whose replay field is
 * set to path. Errors as vg_snap_record_parse, plus those of reading the file. */
int vg_snap_record_read(const char *path, struct vg_snapshot **out, struct vg_err *err);

#endif
