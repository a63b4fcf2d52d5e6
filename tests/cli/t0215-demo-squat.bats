#!/usr/bin/env bats
# t0215-demo-squat: another user taking the name of someone's runtime place first does not
# deny them the demo's --keep/--stop. The kept simulation's socket lives in the user's own
# runtime directory ($XDG_RUNTIME_DIR when it is theirs and 0700, else /run/user/UID), which
# nobody else can write; /tmp/vramguard-UID is only the fallback, and one that someone else
# made first is refused with the reason. Run as root for a user (a spare uid, through setpriv)
# whose /tmp/vramguard-UID root squats.

load lib

bats_require_minimum_version 1.5.0

setup() {
    [[ $(id -u) -eq 0 ]] || skip "needs root (to squat another user's names)"
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    PUB=$(mktemp -d /tmp/vg-squat.XXXXXX)
    chmod 755 "$PUB"
    vg_public_bin "$PUB"
    # a uid nobody uses here, with no runtime place of its own yet
    U=
    for u in $(seq 60100 60199); do
        if [[ ! -e /tmp/vramguard-$u && ! -e /run/user/$u ]] && ! getent passwd "$u" >/dev/null; then
            U=$u
            break
        fi
    done
    [[ -n $U ]] || skip "no spare uid in 60100-60199"
    # the squat: root makes the user's fallback directory first
    SQUAT=/tmp/vramguard-$U
    mkdir -m 755 "$SQUAT"
    HOME_=$PUB/home
    mkdir -m 755 "$HOME_"
    mkdir -m 700 "$HOME_/xdg" "$HOME_/tmp"
    chown -R "$U:$U" "$HOME_"
}

teardown() {
    local pid
    if [[ -n ${U:-} ]]; then
        as_user "$VG" demo --stop >/dev/null 2>&1 || true
        # whatever of that user's is left (a failed test): by PID, after a bounded wait
        wait_for "[ -z \"\$(pgrep -u $U)\" ]" 10 || true
        for pid in $(pgrep -u "$U"); do kill -KILL "$pid" 2>/dev/null || true; done
    fi
    vg_cleanup
    if [[ -n ${SQUAT:-} && -d $SQUAT ]]; then rm -rf -- "$SQUAT"; fi
    if [[ -n ${PUB:-} && $PUB == /tmp/vg-squat.* ]]; then rm -rf -- "$PUB"; fi
    if [[ -n ${SQUATTER:-} ]]; then kill "$SQUATTER" 2>/dev/null || true; fi
}

# as_user ARGS...: ARGS as uid U (no passwd entry), its TMPDIR its own, $XDG if set.
as_user() {
    env -i PATH="$PATH" TMPDIR="$HOME_/tmp" ${XDG:+XDG_RUNTIME_DIR=$XDG} \
        timeout 120 setpriv --reuid="$U" --regid="$U" --clear-groups "$@"
}

@test "with its own XDG_RUNTIME_DIR, the demo keeps and stops although /tmp/vramguard-UID is squatted" {
    # the name the demo's socket once had (abstract, anyone's to take) is squatted too
    python3 - "$U" "$HOME_/tmp" "$PUB/squat.ready" <<'PY' &
import socket, sys, time
h = 1469598103934665603
for c in sys.argv[2].encode():
    h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0vramguard-demo.%s.%016x" % (sys.argv[1], h))
s.listen(1)
open(sys.argv[3], "w").close()
time.sleep(300)
PY
    SQUATTER=$!
    wait_for "[ -e '$PUB/squat.ready' ]" 10
    XDG=$HOME_/xdg
    run --separate-stderr as_user "$VG" demo --keep --helper "$HELPER" --fake-nvml "$FAKE_FULL"
    [ "$status" -eq 0 ]
    [[ $output == *"keeps running, as it is, until 'vramguard demo --stop'"* ]]
    [ -S "$XDG"/vramguard/demo.*.sock ]
    [ "$(stat -c %u:%a "$XDG/vramguard")" = "$U:700" ]
    run --separate-stderr as_user "$VG" demo --stop
    [ "$status" -eq 0 ]
    [[ $output == "Simulation cleaned up: "*" processes stopped, its directory removed." ]]
    [ -z "$(ls "$XDG/vramguard")" ] # the socket is gone with it
}

@test "an XDG_RUNTIME_DIR that is not the user's own 0700 directory is passed over; the squatted fallback is refused cleanly" {
    chmod 755 "$HOME_/xdg"
    XDG=$HOME_/xdg
    run --separate-stderr as_user "$VG" demo --keep --helper "$HELPER" --fake-nvml "$FAKE_FULL"
    [ "$status" -eq 70 ]
    [ "$output" = "" ]
    [ "$stderr" = "vramguard: demo: --keep: cannot listen for --stop: the lock directory '$SQUAT' belongs to uid 0, not to you: refusing to use it" ]
    [ ! -e "$HOME_/xdg/vramguard" ]
    run --separate-stderr as_user "$VG" demo --stop
    [ "$status" -eq 70 ]
    [[ $stderr == "vramguard: demo: --stop: the lock directory '$SQUAT' belongs to uid 0"* ]]
}
