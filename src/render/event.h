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

/* An alert command's environment for ev (watch --exec): VRAMGUARD_EVENT, _ALERT, _SEVERITY,
 * _TIME (when), _HOST (NULL: left out), _GPU, _GPU_UUID, _MIG_DEVICE, _PID, _USER, _COMMAND,
 * _MEMORY, _EXPECT and _MESSAGE, each NAME=VALUE with the value escaped as text output is, an
 * unknown one left out. 0 with *env (malloc'ed, *n entries, vg_render_event_env_free()), or a
 * negative errno with nothing set: a command never runs with a variable silently missing. */
int vg_render_event_env(const struct vg_event *ev, const char *host, const struct timespec *when,
                        char ***env, size_t *n);
void vg_render_event_env_free(char **env, size_t n);

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
