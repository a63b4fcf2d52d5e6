#!/usr/bin/env bats
# t0815-privileged-copies: a real setuid-root copy (chmod u+s) and a real file-capability copy
# (setcap cap_sys_ptrace,cap_dac_read_search+ep), each run as nobody through setpriv. Such a
# copy opens files with rights its caller lacks, so what the caller names is refused or held to
# paths root alone can change: --nvml (code it loads), --proc and --dev (what it reads and
# shows) take only such paths; --record and --replay are refused (neither needs privileges);
# --config reads only root's files and quotes a bad line only when the caller could read the
# file; watch's alert commands, demo and the hand-off are refused; run's job runs as the
# caller. Plain use still works. docs/reliability.md, "Trust boundaries".

load lib

bats_require_minimum_version 1.5.0

setup() {
    [[ $(id -u) -eq 0 ]] || skip "needs root (to make setuid and setcap copies)"
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    command -v setcap >/dev/null || skip "setcap (libcap2-bin) is not installed"
    PUB=$(mktemp -d /tmp/vg-priv.XXXXXX)
    chmod 755 "$PUB"
    if findmnt -no OPTIONS -T "$PUB" | grep -qw nosuid; then skip "/tmp is mounted nosuid"; fi
    vg_public_bin "$PUB"
    SUID=$PUB/bin/vramguard-suid
    CAPS=$PUB/bin/vramguard-caps
    cp "$VG" "$SUID" && chmod 4755 "$SUID"
    cp "$VG" "$CAPS" && chmod 755 "$CAPS"
    setcap cap_sys_ptrace,cap_dac_read_search+ep "$CAPS" || skip "this filesystem keeps no file capabilities"
    DEVDIR=$(vg_fake_dev "$PUB" 2)
    chmod -R a+rX "$DEVDIR"
    vg_scenario "$PUB/scenario" <<EOF2
driver 550.54.15
gpu index=0 uuid=GPU-0d000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=0 cc=9.0
EOF2
    chmod 644 "$PUB/scenario"
    # nobody's own place, and a root-owned library in a directory anyone may write
    EVIL=$PUB/evil
    mkdir -m 755 "$EVIL" "$EVIL/proc" "$EVIL/dev" "$PUB/open"
    cp "$FAKE_FULL" "$EVIL/libnvidia-ml.so.1"
    chown -R nobody:nogroup "$EVIL"
    cp "$FAKE_FULL" "$PUB/open/libnvidia-ml.so.1"
    chmod 777 "$PUB/open"
    # a root-only file with a secret first line, and a root-owned readable config
    printf 'root:SECRET-HASH:19000:0:99999:7:::\n' >"$PUB/shadow"
    chmod 600 "$PUB/shadow"
    printf 'expect = 0=none\n' >"$PUB/check.conf"
    chmod 644 "$PUB/check.conf"
}

teardown() {
    vg_cleanup
    if [[ -n ${PUB:-} && $PUB == /tmp/vg-priv.* ]]; then rm -rf -- "$PUB"; fi
}

# as_nobody BIN ARGS...: BIN ARGS as nobody:nogroup without supplementary groups. In the
# sanitizer build, LeakSanitizer is off: its tracer cannot ptrace a setuid process, which is
# not dumpable.
as_nobody() {
    local bin=$1 san=()
    shift
    if grep -qa __asan_init "$bin"; then san=(env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"); fi
    run --separate-stderr timeout 30 "${san[@]}" setpriv --reuid=65534 --regid=65534 \
        --clear-groups "$bin" "$@"
}

copies() {
    printf '%s\n' "$SUID" "$CAPS"
}

@test "the copies are what they claim: setuid root, and file capabilities" {
    [ "$(stat -c %U:%A "$SUID")" = "root:-rwsr-xr-x" ]
    getcap "$CAPS" | grep -q 'cap_dac_read_search,cap_sys_ptrace[=+]ep'
}

@test "plain use works: status, doctor and check with root's files, as nobody" {
    for bin in $(copies); do
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" status
        [ "$status" -eq 0 ]
        [[ $output == *"GPU 0  NVIDIA H100 80GB HBM3"* ]]
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" --proc /proc doctor
        [ "$status" -eq 0 ]
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" check --config "$PUB/check.conf"
        [ "$status" -eq 0 ]
        [[ $output == "VRAMGUARD OK"* ]]
    done
}

@test "--nvml: a library nobody may change, or in a directory anyone may write, is refused" {
    for bin in $(copies); do
        as_nobody "$bin" --nvml "$EVIL/libnvidia-ml.so.1" --dev "$DEVDIR" status
        [ "$status" -eq 64 ]
        [ "$output" = "" ]
        [ "$stderr" = "vramguard: --nvml '$EVIL/libnvidia-ml.so.1' is refused: a setuid or file-capability copy uses only files that root alone can change, and '$EVIL/libnvidia-ml.so.1' belongs to uid 65534, not to root" ]
        # after the command too, and through a symlink nobody made
        as_nobody "$bin" status --nvml "$PUB/open/libnvidia-ml.so.1"
        [ "$status" -eq 64 ]
        [[ $stderr == "vramguard: status: --nvml '$PUB/open/libnvidia-ml.so.1' is refused: "*", and '$PUB/open' is writable by others" ]]
    done
}

@test "--proc and --dev: a directory nobody may change is refused" {
    for bin in $(copies); do
        as_nobody "$bin" --nvml "$FAKE_FULL" --proc "$EVIL/proc" status
        [ "$status" -eq 64 ]
        [[ $stderr == "vramguard: --proc '$EVIL/proc' is refused: "*"'$EVIL/proc' belongs to uid 65534, not to root" ]]
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$EVIL/dev" status
        [ "$status" -eq 64 ]
        [[ $stderr == "vramguard: --dev '$EVIL/dev' is refused: "*"'$EVIL/dev' belongs to uid 65534, not to root" ]]
    done
}

@test "--record and --replay are refused, and nothing is written" {
    for bin in $(copies); do
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" status --record "$PUB/rec"
        [ "$status" -eq 64 ]
        [ "$stderr" = "vramguard: status: --record is refused in a setuid or file-capability copy: it would write the file with rights you lack; run an ordinary copy of vramguard for it" ]
        [ ! -e "$PUB/rec" ]
        as_nobody "$bin" --replay "$PUB/shadow" status
        [ "$status" -eq 64 ]
        [[ $stderr == "vramguard: --replay is refused in a setuid or file-capability copy: "* ]]
        [[ $stderr != *SECRET* ]]
    done
}

@test "--config: a root-only file's bad line is named by its number only; nobody's config is refused" {
    for bin in $(copies); do
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" check --config "$PUB/shadow"
        [ "$status" -eq 64 ]
        [ "$stderr" = "vramguard: check: $PUB/shadow:1: not a valid setting (the line is not shown: you cannot read this file yourself)" ]
        [[ $stderr != *SECRET* ]]
        # a file nobody may read itself is quoted
        printf 'just words\n' >"$PUB/bad.conf"
        chmod 644 "$PUB/bad.conf"
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" check --config "$PUB/bad.conf"
        [ "$status" -eq 64 ]
        [ "$stderr" = "vramguard: check: $PUB/bad.conf:1: expected 'key = value', got 'just words'" ]
        printf 'expect = 0=none\n' >"$EVIL/watch.conf"
        chown nobody "$EVIL/watch.conf"
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" check --config "$EVIL/watch.conf"
        [ "$status" -eq 64 ]
        [ "$stderr" = "vramguard: check: $EVIL/watch.conf: refused: a setuid or file-capability copy reads only a config that root alone can change, and '$EVIL/watch.conf' belongs to uid 65534, not to root" ]
    done
}

@test "watch: alert commands are refused, from a flag or from root's own config" {
    printf 'exec = /bin/true\n' >"$PUB/exec.conf"
    chmod 644 "$PUB/exec.conf"
    for bin in $(copies); do
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once --exec /bin/true
        [ "$status" -eq 64 ]
        [ "$stderr" = "vramguard: watch: alert commands (exec) are refused in a setuid or file-capability copy: they would run with its privileges and your environment; run watch as a service (contrib/systemd) for them" ]
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once --config "$PUB/exec.conf"
        [ "$status" -eq 64 ]
        [[ $stderr == *"alert commands (exec) are refused"* ]]
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once
        [ "$status" -eq 0 ]
    done
}

@test "demo and the hand-off are refused; run's job runs as the caller" {
    for bin in $(copies); do
        as_nobody "$bin" demo --helper "$EVIL/x" --fake-nvml "$EVIL/libnvidia-ml.so.1"
        [ "$status" -eq 64 ]
        [[ $stderr == "vramguard: demo: demo is refused in a setuid or file-capability copy: "* ]]
        as_nobody "$bin" --nvml "$FAKE_FULL" --dev "$DEVDIR" handoff epilog --job 1 --uid root
        [ "$status" -eq 64 ]
        [[ $stderr == "vramguard: handoff: handoff is refused in a setuid or file-capability copy: "* ]]
    done
    as_nobody "$SUID" --nvml "$FAKE_FULL" --dev "$DEVDIR" run --gpus 0 -- \
        sh -c 'grep "^[UG]id:" /proc/self/status'
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "Uid:	65534	65534	65534	65534" ]
    [ "${lines[1]}" = "Gid:	65534	65534	65534	65534" ]
}

@test "an ordinary copy as nobody reads nobody's own config and its own files" {
    printf 'expect = 0=none\n' >"$EVIL/watch.conf"
    chown nobody "$EVIL/watch.conf"
    as_nobody "$VG" --nvml "$EVIL/libnvidia-ml.so.1" --dev "$DEVDIR" watch --once \
        --config "$EVIL/watch.conf"
    [ "$status" -eq 0 ]
    as_nobody "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" status --record "$EVIL/rec"
    [ "$status" -eq 0 ]
    as_nobody "$VG" --replay "$EVIL/rec" status
    [ "$status" -eq 0 ]
}
