#!/usr/bin/env bats
# t1719-install-deps-services: scripts/install-deps leaves nothing enabled that its install
# enabled. apt-get and dpkg-query are stand-ins here (one package reported missing; the
# "install" enables a timer the way a postinst's deb-systemd-helper does: a link in
# /etc/systemd/system/timers.target.wants/), so no package is installed; what is checked
# is that the script finds what appeared and disables it, and leaves what was enabled before
# alone. Root only: it writes under /etc and /usr/sbin (policy-rc.d), and puts everything back.

load lib

bats_require_minimum_version 1.5.0

setup() {
    [ "$(id -u)" -eq 0 ] || skip "needs root (writes under /etc)"
    [ -d /etc/systemd/system ] || skip "no /etc/systemd/system"
    TMP=$(vg_tmpdir)
    FAKE=$TMP/bin
    mkdir -p "$FAKE"
    UNIT=vg-install-deps-test-$$.timer
    # the package the stand-in dpkg-query says is missing
    printf '%s\n' '#!/bin/sh' \
        'for a; do [ "$a" = socat ] && exit 1; done' \
        'exec /usr/bin/dpkg-query "$@"' >"$FAKE/dpkg-query"
    # the stand-in apt-get: "install" enables what a postinst would, "update" does nothing
    printf '%s\n' '#!/bin/sh' \
        'case " $* " in' \
        '*" install "*)' \
        '    mkdir -p /etc/systemd/system/timers.target.wants' \
        "    ln -sf /dev/null /etc/systemd/system/timers.target.wants/$UNIT" \
        "    echo \"\$*\" >>'$TMP/apt-get.log' ;;" \
        'esac' \
        'exit 0' >"$FAKE/apt-get"
    chmod +x "$FAKE/dpkg-query" "$FAKE/apt-get"
}

teardown() {
    rm -f "/etc/systemd/system/timers.target.wants/$UNIT"
    vg_cleanup
}

@test "what the install enables is disabled again; what was enabled before stays" {
    local before after
    before=$(find /etc/systemd/system -mindepth 2 -maxdepth 2 -path '*.wants/*' | sort)
    run env PATH="$FAKE:$PATH" "$ROOT/scripts/install-deps" --test
    echo "$output"
    [ "$status" -eq 0 ]
    grep -q 'install.*socat' "$TMP/apt-get.log" # the stand-in ran: the links were made
    [[ $output == *"disabled $UNIT (enabled by the install)"* ]]
    [ ! -L "/etc/systemd/system/timers.target.wants/$UNIT" ]
    after=$(find /etc/systemd/system -mindepth 2 -maxdepth 2 -path '*.wants/*' | sort)
    [ "$before" = "$after" ]
    # the policy that kept daemons from starting during the install is gone again
    run ! grep -qs 'install-deps: no service starts' /usr/sbin/policy-rc.d
}
