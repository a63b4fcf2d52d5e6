/*
 * What a systemd service tells its manager, without libsystemd: the sd_notify protocol (one
 * datagram of NAME=VALUE lines to the AF_UNIX socket named by $NOTIFY_SOCKET, abstract when the
 * name starts with '@'), the watchdog's period ($WATCHDOG_USEC, for this process only when
 * $WATCHDOG_PID is set), and whether a stream is connected to the journal ($JOURNAL_STREAM,
 * "DEVICE:INODE" of the stream systemd gave us), in which case each line may start with a
 * syslog priority "<N>" that journald takes off and keeps as the line's PRIORITY=.
 *
 * Everything is read from the environment at each call and nothing is kept: outside a service
 * (no $NOTIFY_SOCKET, no $WATCHDOG_USEC, no $JOURNAL_STREAM) every call is a no-op.
 * See sd_notify(3), sd_watchdog_enabled(3), systemd.exec(5) ($JOURNAL_STREAM), sd-daemon(3).
 */
#ifndef VG_UTIL_SDNOTIFY_H
#define VG_UTIL_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

/* The syslog priorities of sd-daemon.h's SD_CRIT, SD_ERR, SD_WARNING, SD_INFO prefixes. */
enum vg_sd_level { VG_SD_CRIT = 2, VG_SD_ERR = 3, VG_SD_WARNING = 4, VG_SD_INFO = 6 };

/* Send state ("READY=1", "WATCHDOG=1", "STOPPING=1", several separated by '\n') to the
 * manager. 1 when sent, 0 when $NOTIFY_SOCKET is unset (not a notify service), or a negative
 * errno with a message in err (a socket name that is not one, a manager that went away). */
int vg_sd_notify(const char *state, struct vg_err *err);

/* The watchdog's period in microseconds ($WATCHDOG_USEC), 0 when there is none or when
 * $WATCHDOG_PID names another process (the variable was inherited, not meant for us). */
uint64_t vg_sd_watchdog_usec(void);

/* A watchdog pacer: pings ("WATCHDOG=1") at half the period, from the caller's loop, so that
 * a loop that stops running stops the pings and the manager restarts the service. */
struct vg_sd_watchdog {
    uint64_t every_ms; /* 0: no watchdog */
    uint64_t next_ms;  /* on vg_clock_ms()'s clock */
};

/* Read the period (now_ms: vg_clock_ms()); the first ping is due at once. */
void vg_sd_watchdog_init(struct vg_sd_watchdog *wd, uint64_t now_ms);
/* Ping when one is due. 1 when sent, 0 when none was due (or no watchdog), negative errno as
 * vg_sd_notify. */
int vg_sd_watchdog_tick(struct vg_sd_watchdog *wd, uint64_t now_ms, struct vg_err *err);
/* Milliseconds until the next ping is due (0: now); UINT64_MAX without a watchdog. For the
 * caller's poll timeout. */
uint64_t vg_sd_watchdog_wait_ms(const struct vg_sd_watchdog *wd, uint64_t now_ms);

/* Is fd the stream systemd connected to the journal ($JOURNAL_STREAM names its device and
 * inode)? false outside a service, and when the stream was redirected since (a shell's
 * 2>file in ExecStart=, a pipe to another program). */
bool vg_sd_journal_stream(int fd);

#endif
