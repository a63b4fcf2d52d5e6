#!/usr/bin/env bats
# t0507-watch-config-trust: watch runs the exec lines of its config, so it reads a config only
# when nobody but root or the user running it can change it, nor any directory above it (as
# sshd's StrictModes): a file others may write, one owned by another user, one in a directory
# others may write (without the sticky bit) is refused with the reason, at the start and at
# every SIGHUP, when the configuration in effect is kept. A sticky root directory (/tmp) is
# fine. check reads no commands and is not held to it. Run as root (the files change owners).

load lib
load watch

setup() {
    [[ $(id -u) -eq 0 ]] || skip "needs root (to give files to another user)"
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
    CFG=$TMP/conf.d
    mkdir -m 755 "$CFG"
    host
}

teardown() {
    watch_teardown
}

# refused_at_start WHY: watch --config $CFG/watch.conf exits 64 at once, saying WHY.
refused_at_start() {
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once \
        --config "$CFG/watch.conf"
    [ "$status" -eq 64 ]
    [ "$output" = "" ]
    [[ $stderr == "vramguard: watch: $CFG/watch.conf: refused: a config whose alert commands run must be changeable by root or you alone, and $1" ]]
}

@test "a config others may write, or another user's, or in a directory others may write, is refused" {
    printf 'exec = /bin/true\n' >"$CFG/watch.conf"
    chmod 666 "$CFG/watch.conf"
    refused_at_start "'$CFG/watch.conf' is writable by others"
    chmod 664 "$CFG/watch.conf"
    refused_at_start "'$CFG/watch.conf' is writable by its group"
    chmod 644 "$CFG/watch.conf"
    chown nobody "$CFG/watch.conf"
    refused_at_start "'$CFG/watch.conf' belongs to uid 65534, not to root"
    chown root "$CFG/watch.conf"
    chmod 777 "$CFG"
    refused_at_start "'$CFG' is writable by others"
    chmod 1777 "$CFG" # sticky, but another user's: they may replace any entry
    chown nobody "$CFG"
    refused_at_start "'$CFG' belongs to uid 65534, not to root"
    # a symlink is judged by what it points to
    chown root "$CFG" && chmod 755 "$CFG"
    mkdir -m 777 "$TMP/open"
    printf 'exec = /bin/true\n' >"$TMP/open/evil.conf"
    ln -sf "$TMP/open/evil.conf" "$CFG/watch.conf"
    refused_at_start "'$TMP/open' is writable by others"
}

@test "a config only root can change is read, in a sticky root directory (/tmp) too; check is not held to it" {
    printf 'expect = 0=none\n' >"$CFG/watch.conf"
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once \
        --config "$CFG/watch.conf"
    [ "$status" -eq 0 ]
    sticky=$(mktemp -d /tmp/vg-sticky.XXXXXX)
    chmod 1777 "$sticky"
    cp "$CFG/watch.conf" "$sticky/watch.conf"
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once \
        --config "$sticky/watch.conf"
    rc=$status
    chmod 666 "$sticky/watch.conf"
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" check \
        --config "$sticky/watch.conf"
    rm -rf -- "$sticky"
    [ "$rc" -eq 0 ]
    [ "$status" -eq 0 ]
}

@test "SIGHUP: a config swapped for one others can change is refused, the old one kept, and why said" {
    A=$(vg_spawn --open "$(dev 0)" -- python x.py)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    printf 'expect = 0=%s\n' "$A" >"$CFG/watch.conf"
    watch_start --config "$CFG/watch.conf"
    wait_samples 2
    [ "$(nlines ' alert ')" -eq 0 ]
    # 1: the directory opened to all, and a file with an exec line swapped in
    chmod 777 "$CFG"
    printf 'expect = 0=none\nexec = /bin/true\n' >"$CFG/new" && mv "$CFG/new" "$CFG/watch.conf"
    kill -HUP "$WPID"
    wait_line "SIGHUP: $CFG/watch.conf: refused: a config whose alert commands run must be changeable by root or you alone, and '$CFG' is writable by others; keeping the configuration in effect" 1 "$WERR"
    wait_samples 3
    [ "$(nlines ' alert ')" -eq 0 ]
    # 2: the directory closed again, but the file now another user's
    chmod 755 "$CFG"
    chown nobody "$CFG/watch.conf"
    kill -HUP "$WPID"
    wait_line "'$CFG/watch.conf' belongs to uid 65534, not to root; keeping the configuration in effect" 1 "$WERR"
    # 3: the file made writable by all
    chown root "$CFG/watch.conf" && chmod 666 "$CFG/watch.conf"
    kill -HUP "$WPID"
    wait_line "'$CFG/watch.conf' is writable by others; keeping the configuration in effect" 1 "$WERR"
    wait_samples 3
    [ "$(nlines ' alert ')" -eq 0 ]
    kill -0 "$WPID"
    # and once it is root's alone again, it is read
    chmod 644 "$CFG/watch.conf"
    printf 'expect = 0=none\n' >"$CFG/watch.conf"
    kill -HUP "$WPID"
    wait_line "SIGHUP: configuration read again from '$CFG/watch.conf'" 1 "$WERR"
    wait_line "alert CRITICAL GPU 0 (GPU-00000000) should be empty"
}
