#!/usr/bin/env bats
# t0505-watch-contrib: the deployment files of `watch`: the systemd unit is hardened, passes
# `systemd-analyze verify`, reloads with SIGHUP, and its command line with the shipped example
# configuration is one `watch` accepts.

load lib
load watch

UNIT=$ROOT/contrib/systemd/vramguard-watch.service.in
CONF=$ROOT/contrib/vramguard/watch.conf

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

@test "the systemd unit is hardened, reloads with SIGHUP, and systemd-analyze accepts it" {
    for key in DynamicUser=yes NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes \
        PrivateTmp=yes ReadOnlyPaths=/etc/vramguard \
        'CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH' \
        'AmbientCapabilities=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH' \
        'ExecReload=/bin/kill -HUP $MAINPID' KillMode=control-group DevicePolicy=closed \
        Type=notify WatchdogSec=60s; do
        grep -qxF -- "$key" "$UNIT" || { echo "missing: $key"; return 1; }
    done
    # It must see every process: no hidden /proc.
    run ! grep -Eq '^(ProtectProc=invisible|ProcSubset=pid|PrivateDevices=yes)' "$UNIT"
    command -v systemd-analyze >/dev/null || skip "systemd-analyze is missing (apt-get install systemd)"
    local copy=$TMP/vramguard-watch.service
    # The template filled in as make install does, with the build directory as BINDIR (any
    # prefix: the unit names no path of its own).
    sed "s|@BINDIR@|${VG%/*}|g" "$UNIT" >"$copy"
    run systemd-analyze verify --man=no "$copy"
    printf '%s\n' "$output"
    [ "$status" -eq 0 ]
}

@test "the unit's command line, with the example configuration, runs" {
    local args
    args=$(sed -n 's|^ExecStart=@BINDIR@/vramguard ||p' "$UNIT")
    [ "$args" = "watch --config /etc/vramguard/watch.conf" ]
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB"
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --config "$CONF" --once
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [[ $output == *"holder-present PID $A on GPU 1"* ]]
    # every commented-out line is a valid setting too
    sed -n 's/^#\([a-z_]* = .*\)$/\1/p' "$CONF" | sed 's|^exec = .*|exec = /bin/true|' >"$TMP/all.conf"
    grep -c . "$TMP/all.conf"
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --config "$TMP/all.conf" --once
    echo "$stderr"
    [ "$status" -eq 0 ]
}
