/*
 * A message for a caller's log callback, formatted whole: however long what it names (a
 * command line, a path), never cut. When the memory for it runs out, the callback gets a fixed
 * line saying that a message was lost instead, so that nothing is dropped in silence. Used by
 * the job's log (job.c) and the alert commands' reports (alert.c).
 */
#ifndef VG_ACT_NOTE_H
#define VG_ACT_NOTE_H

#include <stdarg.h>

/* Format fmt with ap and hand it to fn(ctx, ...), or lost when out of memory; nothing when fn
 * is NULL. */
void vg_note_v(void (*fn)(void *ctx, const char *msg), void *ctx, const char *lost, const char *fmt,
               va_list ap);

#endif
