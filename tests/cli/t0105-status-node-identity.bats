#!/usr/bin/env bats
# t0105-status-node-identity: a holder is a process whose descriptor refers to an NVIDIA node,
# whatever path it was opened by; a path that only looks like one is nothing (issue 18).
#
# - Real character devices (mknod), held through O_PATH since no driver answers an open: under
#   --dev, through another node of the same numbers, through a bind mount in another mount
#   namespace; a null-device stand-in counts as its own inode, /dev/null itself does not.
# - Plain-file stand-ins: through a bind mount they count, a file that only carries a node's
#   name (elsewhere, or mounted over the node's path in another mount namespace) does not.
# - Spoofing: nobody, in its own user + mount namespace, mounts a tmpfs over root's --dev
#   directory and over /dev and holds files named nvidia0.. from several processes: root's
#   status reports none of them.
# - One process holding thousands of nodes: bounded output, an honest "N more".
#
# Why major 4000 and not 195 for the real nodes: the suite runs files in parallel, and every
# vramguard on this host counts a held node of major 195 as a GPU wherever it is, so such a
# node would show up in other tests' exact holder lists. Here the nodes use a major no driver
# registered, declared the NVIDIA major (and 4001 nvidia-uvm's) in a /proc/devices bound over
# the real one in a private mount namespace where this file's vramguard runs; every other
# test reads the real /proc/devices and never sees them. The 195 fallback itself is covered by
# tests/unit/test_proc_devset.c on nodes nothing holds open.
#
# Needs root (mknod, mount, setpriv, unshare); skipped otherwise.

load lib

bats_require_minimum_version 1.5.0

setup() {
    [[ $(id -u) -eq 0 ]] || skip "needs root (mknod, mount namespaces)"
    command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
    vg_require_jq
    TMP=$(vg_tmpdir)
    printf 'Character devices:\n  1 mem\n4000 nvidia-frontend\n4001 nvidia-uvm\n\nBlock devices:\n' \
        >"$TMP/devices"
    vg_scenario_host h100x4
}

teardown() {
    vg_cleanup
    if [[ -n ${PUB:-} && $PUB == /tmp/vg-spoof.* ]]; then rm -rf -- "$PUB"; fi
}

# vgp ARGS...: `vramguard --json ARGS` with the fake driver, in a private mount namespace whose
# /proc/devices makes 4000 the NVIDIA major (see the header).
vgp() {
    run --separate-stderr vg_with_devices "$TMP/devices" "$VG" --nvml "$FAKE_FULL" --json "$@"
}

# vgh ARGS...: the same on the host's own /proc/devices.
vgh() {
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --json "$@"
}

# spawn_ns SRC DST ARGS...: vg_spawn ARGS in its own mount namespace where SRC is bind-mounted
# over DST (a path the process then opens: its own view, invisible to the scanner's).
spawn_ns() {
    local src=$1 dst=$2
    shift 2
    cat >"$TMP/ns-helper" <<EOF
#!/bin/sh
exec unshare --mount --propagation private sh -c 'mount --bind "\$0" "\$1" && shift && exec "\$@"' \
    '$src' '$dst' '$HELPER' "\$@"
EOF
    chmod 755 "$TMP/ns-helper"
    HELPER=$TMP/ns-helper vg_spawn "$@"
}

# holder_of PID: where the JSON document in $output lists PID, as "gpuN" / "unmatchedN" words.
holder_of() {
    json "[(.gpus[] | .index as \$g | .holders[] | select(.pid == $1) | \"gpu\(\$g)\"),
           (.unmatched_holders[] | select(.holder.pid == $1) | \"unmatched\(.minor)\"),
           (.path_only[] | select(.pid == $1) | .gpus[] | \"path:gpu\(.)\")] | join(\" \")"
}

# Real nodes of major 4000 cannot be opened here (no driver answers), only taken by O_PATH: such a
# descriptor is a path, never a holder (issue 27: any user may take one of a node it cannot
# open), so these processes are reported apart, "path only", with the GPU told the same way.
@test "real nodes held through O_PATH: path only, never holders, by device number under --dev, through another node, through a bind mount in another namespace" {
    REAL=$TMP/real OTHER=$TMP/else
    mkdir -p "$REAL" "$OTHER"
    mknod "$REAL/nvidia0" c 4000 0
    mknod "$REAL/nvidiactl" c 4000 255
    mknod "$REAL/nvidia-uvm" c 4001 0
    mknod "$REAL/nvidia2" c 4000 2
    mknod "$REAL/nvidia3" c 1 3 # a null-device stand-in: its own inode counts
    : >"$REAL/nvidia5"          # a plain stand-in, minor 5: no GPU's
    mknod "$OTHER/mygpu" c 4000 1
    : >"$OTHER/bound"
    a=$(vg_spawn --open-path "$REAL/nvidia0" --open-path "$REAL/nvidiactl" --open-path "$REAL/nvidia-uvm" --comm a-dev)
    b=$(vg_spawn --open-path "$OTHER/mygpu" --comm b-mknod)
    c=$(spawn_ns "$REAL/nvidia2" "$OTHER/bound" --open-path "$OTHER/bound" --comm c-bind)
    d=$(vg_spawn --open "$REAL/nvidia3" --comm d-null)
    e=$(vg_spawn --open /dev/null --comm e-devnull)
    f=$(vg_spawn --open "$REAL/nvidia5" --comm f-plain)

    vgp --dev "$REAL" status
    echo "$output $stderr"
    [ "$status" -eq 0 ]
    [ "$(holder_of "$a")" = path:gpu0 ]
    [ "$(holder_of "$b")" = path:gpu1 ]
    [ "$(holder_of "$c")" = path:gpu2 ]
    [ "$(holder_of "$d")" = gpu3 ]
    [ "$(holder_of "$e")" = "" ]
    [ "$(holder_of "$f")" = unmatched5 ]
    json_ok ".path_only[] | select(.pid == $a) | .comm == \"a-dev\" and .minors == [0]
        and .descriptors == 3
        and .device_nodes == [\"$REAL/nvidia0\", \"$REAL/nvidiactl\", \"$REAL/nvidia-uvm\"]
        and .device_nodes_more == 0"
    json_ok ".path_only[] | select(.pid == $b) | .device_nodes == [\"$OTHER/mygpu\"]"
    # the path the process itself opened, in its own mount namespace
    json_ok ".path_only[] | select(.pid == $c) | .device_nodes == [\"$OTHER/bound\"]"
    json_ok "[.gpus[].holders[].pid] | index($a) == null and index($b) == null and index($c) == null"

    # On the host's /proc/devices (no NVIDIA major but 195) the nodes of major 4000 count only
    # as nodes of --dev, by inode: those under DIR still do, and so does the bind mount of one
    # (the same inode); the other node of the same numbers is nobody's.
    vgh --dev "$REAL" status
    [ "$status" -eq 0 ]
    [ "$(holder_of "$a")" = path:gpu0 ]
    [ "$(holder_of "$b")" = "" ]
    [ "$(holder_of "$c")" = path:gpu2 ]
    [ "$(holder_of "$d")" = gpu3 ]

    # Text: the path-only processes in a section of their own; the nodes are display only,
    # a holder of few nodes gets no extra line.
    run --separate-stderr unshare --mount --propagation private \
        sh -c 'mount --bind "$1" /proc/devices && shift && exec "$@"' sh "$TMP/devices" \
        "$VG" --nvml "$FAKE_FULL" --dev "$REAL" --color=never status
    [ "$status" -eq 0 ]
    [[ $output == *"Path only (O_PATH descriptors of a node: no open of the device, no context, no memory)"* ]]
    [[ $output == *" b-mknod: GPU 1"* ]]
    [[ $output == *" d-null"* ]]
    [[ $output != *"NVIDIA device nodes:"* ]]
}

@test "stand-ins count by inode: through a bind mount yes, a file that only carries the name no" {
    DEVDIR=$(vg_fake_dev "$TMP" 4)
    mkdir -p "$TMP/else"
    : >"$TMP/else/nvidia0"
    : >"$TMP/else/b1"
    : >"$TMP/else/fake2"
    named=$(vg_spawn --open "$TMP/else/nvidia0" --comm only-named)
    bound=$(spawn_ns "$DEVDIR/nvidia1" "$TMP/else/b1" --open "$TMP/else/b1" --comm bound)
    # another file mounted over the node's path: the process opens "DEVDIR/nvidia2", which in
    # its namespace is not the node
    over=$(spawn_ns "$TMP/else/fake2" "$DEVDIR/nvidia2" --open "$DEVDIR/nvidia2" --comm over)
    plain=$(vg_spawn --open "$DEVDIR/nvidia3" --comm plain)

    vgh --dev "$DEVDIR" status
    echo "$output $stderr"
    [ "$status" -eq 0 ]
    [ "$(holder_of "$named")" = "" ]
    [ "$(holder_of "$bound")" = gpu1 ]
    [ "$(holder_of "$over")" = "" ]
    [ "$(holder_of "$plain")" = gpu3 ]
    json_ok ".gpus[3].holders[] | select(.pid == $plain) | .device_nodes == [\"$DEVDIR/nvidia3\"]"
}

@test "spoofing: nobody's private tmpfs over --dev and /dev, files named nvidia*: zero holders" {
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    # What nobody needs lives in a world-readable directory outside bats' (0700), vg-helper
    # too (the build tree may be private: a clone under /root).
    PUB=$(mktemp -d /tmp/vg-spoof.XXXXXX)
    chmod 755 "$PUB"
    vg_public_bin "$PUB"
    DEVDIR=$(vg_fake_dev "$PUB" 4)
    mkdir "$PUB/run"
    chmod 1777 "$PUB/run"
    tag=$(vg_tmpdir)
    # In its own user + mount namespace nobody is root: a tmpfs over root's --dev and over
    # /dev, 40 GPUs' worth of names plus nvidiactl and nvidia-uvm, all held by the carrier and
    # its 4 workers.
    VG_HELPER_TAG=$tag setpriv --reuid=65534 --regid=65534 --clear-groups \
        unshare --user --map-root-user --mount sh -c '
            for d in "$1" /dev; do
                mount -t tmpfs none "$d" || exit 1
                i=0
                while [ $i -lt 40 ]; do : >"$d/nvidia$i"; i=$((i + 1)); done
                : >"$d/nvidiactl"; : >"$d/nvidia-uvm"
            done
            exec "$2" --pidfile "$3" --open-dir "$1" --open-dir /dev --children 4 \
                --comm spoofer --lifetime 60' \
        sh "$DEVDIR" "$HELPER" "$PUB/run/pids" </dev/null >"$PUB/run/log" 2>&1 3>&- &
    wait_for "[[ -s $PUB/run/pids ]] || ! kill -0 $! 2>/dev/null"
    [[ -s $PUB/run/pids ]] || { cat "$PUB/run/log"; false; }
    mapfile -t spoof < <(awk '$1 == "main" || $1 == "child" { print $2 }' "$PUB/run/pids")
    [ "${#spoof[@]}" -eq 5 ]
    # they do hold what reads like the nodes: 42 under --dev, 42 under /dev
    held=$(for fd in /proc/"${spoof[0]}"/fd/*; do readlink "$fd"; done)
    [ "$(grep -c "^$DEVDIR/nvidia" <<<"$held")" -eq 42 ]
    [ "$(grep -c "^/dev/nvidia" <<<"$held")" -eq 42 ]
    pids=$(IFS=,; echo "${spoof[*]}")

    for dev in "$DEVDIR" /dev; do
        vgh --dev "$dev" status
        echo "--dev $dev: $output $stderr"
        [ "$status" -eq 0 ]
        json_ok "[.gpus[].holders[].pid, .unmatched_holders[].holder.pid] as \$h
            | [$pids] | all(. as \$p | \$h | index(\$p) == null)"
    done
    # the real stand-ins still count, for a process that holds one
    real=$(vg_spawn --open "$DEVDIR/nvidia1")
    vgh --dev "$DEVDIR" status
    [ "$(holder_of "$real")" = gpu1 ]
}

@test "one process holding thousands of nodes: listed up to 64, the rest an honest count" {
    DEVDIR=$(vg_fake_dev "$TMP" 4)
    mkdir "$DEVDIR/nvidia-caps"
    for ((i = 1; i <= 3000; i++)); do : >"$DEVDIR/nvidia-caps/nvidia-cap$i"; done
    pid=$(vg_spawn --open "$DEVDIR/nvidia0" --open "$DEVDIR/nvidiactl" --open-dir "$DEVDIR/nvidia-caps" --comm many-caps)

    run --separate-stderr timeout 60 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json status
    [ "$status" -eq 0 ]
    json_ok ".gpus[0].holders[] | select(.pid == $pid)
        | (.device_nodes | length) == 64 and .device_nodes_more == 3002 - 64
        and .device_nodes[0] == \"$DEVDIR/nvidia0\" and .device_nodes[1] == \"$DEVDIR/nvidiactl\""
    (( ${#output} < 64 * 1024 ))

    run --separate-stderr timeout 60 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --color=never status
    [ "$status" -eq 0 ]
    echo "$output"
    [[ $output == *"holds 3002 NVIDIA device nodes: $DEVDIR/nvidia0, $DEVDIR/nvidiactl, "*" and 2999 more"* ]]
    (( ${#lines[@]} < 40 ))
}
