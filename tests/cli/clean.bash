# shellcheck shell=bash disable=SC2034,SC2154 # the variables set here are for the test files
# tests/cli/clean.bash: what the `clean` tests (t06xx) share, loaded after lib (`load lib` then
# `load clean`).
#
# vgc ARGS...: bats `run --separate-stderr` of "vramguard --nvml FAKE --dev DEVDIR ARGS", stdout
#   in $output and stderr in $stderr. A leading `as_nobody` word runs it as nobody (setpriv),
#   which needs a world-readable DEVDIR and scenario: use clean_world first. After
#   vg_pidns_start it runs in that PID namespace.
# two_gpus [LINES...]: a scenario of two GPUs, GPU 0 on /dev/nvidia0 and GPU 1 on /dev/nvidia1,
#   memory "used=auto" (the sum of their proc lines) unless USED0/USED1 say otherwise, then the
#   given lines.
# clean_world: DEVDIR, the scenario and copies of what vramguard loads (vg_public_bin: the
#   build tree may be private to root) live in a fresh directory under /tmp that every user
#   can read (bats' own temporary directories are private to root); removed by the teardown.
# fake_smi [EXIT]: a fake nvidia-smi first in PATH that appends its arguments to $SMI_LOG and,
#   when SMI_AFTER names a scenario file, installs it (the reset "frees" the memory); exits EXIT
#   (default 0).
# alive_as_before PID START: true when PID still runs with that start time.
# show: prints the last command's status, stdout and stderr (bats shows it on failure).

bats_require_minimum_version 1.5.0

U0=GPU-0c1ea000-0000-4000-8000-000000000000
U1=GPU-0c1ea111-1111-4111-8111-111111111111

vgc() {
    local pre=()
    if [[ ${1:-} == as_nobody ]]; then
        shift
        pre=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    fi
    if [[ -z ${DEVDIR:-} ]]; then
        vg_fake_dev >/dev/null || return 1
    fi
    if [[ -n ${VG_NS:-} ]]; then pre=(nsenter --target "$VG_NS" --pid --mount -- "${pre[@]}"); fi
    run --separate-stderr "${pre[@]}" "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
}

clean_world() {
    local d
    d=$(mktemp -d /tmp/vg-clean.XXXXXX) && chmod 755 "$d" || return 1
    _vg_dir || return 1
    printf '%s\n' "$d" >>"$_VG_STATE/clean-dirs"
    vg_fake_dev "$d" >/dev/null || return 1
    chmod 755 "$DEVDIR" && chmod 644 "$DEVDIR"/* || return 1
    vg_public_bin "$d" || return 1
    SCENARIO_FILE=$d/scenario
}

two_gpus() {
    vg_scenario "${SCENARIO_FILE:-scenario}" <<EOF
driver 550.54.15
cuda 12040
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=${USED0:-auto} util=0 cc=8.0
gpu index=1 uuid=$U1 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=${USED1:-auto} util=0 cc=8.0
$(printf '%s\n' "$@")
EOF
    if [[ -n ${SCENARIO_FILE:-} ]]; then chmod 644 "$SCENARIO_FILE"; fi
}

fake_smi() {
    local dir
    _vg_dir || return 1
    dir=$_VG_DIR/smi
    mkdir -p "$dir" || return 1
    SMI_LOG=$dir/argv
    cat >"$dir/nvidia-smi" <<EOF
#!/bin/bash
printf '%s\n' "\$*" >>"$SMI_LOG"
if [[ -n \${SMI_AFTER:-} ]]; then
    cp "\$SMI_AFTER" "\$FAKE_NVML_SCENARIO.smi" && mv -f "\$FAKE_NVML_SCENARIO.smi" "\$FAKE_NVML_SCENARIO"
fi
echo "GPU 00000000:0F:00.0 was successfully reset."
exit ${1:-0}
EOF
    chmod 755 "$dir/nvidia-smi" || return 1
    export PATH=$dir:$PATH SMI_LOG
}

alive_as_before() {
    local cur
    cur=$(vg_stat "$1" starttime) || return 1
    [[ $cur == "$2" ]] && ! vg_gone "$1"
}

show() {
    printf 'status %s\nstdout:\n%s\nstderr:\n%s\n' "$status" "$output" "${stderr:-}"
}

# clean_teardown: what every clean test leaves behind goes (a file with its own teardown calls it).
clean_teardown() {
    local d
    vg_cleanup
    _vg_dir || return 0
    if [[ -f $_VG_STATE/clean-dirs ]]; then
        while read -r d; do
            if [[ $d == /tmp/vg-clean.* ]]; then rm -rf -- "$d"; fi
        done <"$_VG_STATE/clean-dirs"
        rm -f "$_VG_STATE/clean-dirs"
    fi
}

teardown() {
    clean_teardown
}
