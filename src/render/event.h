/*
 * The words of watch events (model/watch.h): a text line for people and logs, one
 * vramguard.event/1 JSON object per line for scripts (docs/json.md), and the message both
 * carry, written here from the event's data so the engine stays free of English.
 */
#ifndef VG_RENDER_EVENT_H
#define VG_RENDER_EVENT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "model/watch.h"
#include "util/buf.h"
#include "util/sdnotify.h"

#define VG_JSON_SCHEMA_EVENT "vramguard.event/1"

/* Append the event's message (one line, people's words, not escaped) to out. false, with
 * nothing appended, for an alert event whose alert has no message (JSON null). */
bool vg_render_event_message(const struct vg_event *ev, struct vg_buf *out);

/* Text: "TIME EVENT MESSAGE" (colour when st is given); JSON: one object per line. when is the
 * sample's time. 0, or the buffer's error. */
struct vg_style;
int vg_render_event_text(const struct vg_event *ev, const struct timespec *when,
                         const struct vg_style *st, struct vg_buf *out);
int vg_render_event_json(const struct vg_event *ev, const struct timespec *when, uint64_t sample,
                         struct vg_buf *out);

/* The event's syslog priority for journald (enum vg_sd_level): the severity of what shows one
 * (CRITICAL: crit, WARNING: warning), info for the rest. */
int vg_render_event_priority(const struct vg_event *ev);

#endif
