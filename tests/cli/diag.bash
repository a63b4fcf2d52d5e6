# shellcheck shell=bash disable=SC2034 # the variables set here are for the test files
# tests/cli/diag.bash: what the `doctor` (t02xx) and `visible` (t03xx) tests share, loaded after
# lib (`load lib` then `load diag`).
#
# vgd ARGS...: bats `run --separate-stderr` of "vramguard --nvml ... --dev ... ARGS" with the
# fake driver, stdout in $output and stderr in $stderr. The shell's CUDA_VISIBLE_DEVICES and
# CUDA_DEVICE_ORDER are always removed first (the runner's own environment must never leak into
# a shell check); set them for one call with leading NAME=VALUE words, e.g.
#   vgd CUDA_VISIBLE_DEVICES=0,,1 CUDA_DEVICE_ORDER=PCI_BUS_ID doctor --json
#
# Findings, on $output of `vgd --json doctor ...`:
#   nfind RULE                 prints how many findings RULE has
#   finding_is RULE GPUS PIDS  true when some finding of RULE has exactly these gpus and pids
#                              (JSON arrays as text, in order: '[0]' '[1234]')
#   rules_fired                prints the rules that fired, sorted, unique, comma-separated

bats_require_minimum_version 1.5.0

vgd() {
    local e=()
    while [[ $# -gt 0 && $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
        e+=("$1")
        shift
    done
    if [[ -z ${DEVDIR:-} ]]; then
        _vg_dir || return 1
        DEVDIR=$_VG_DIR/dev
        [[ -d $DEVDIR ]] || vg_fake_dev >/dev/null || return 1
    fi
    run --separate-stderr env -u CUDA_VISIBLE_DEVICES -u CUDA_DEVICE_ORDER "${e[@]}" \
        "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
}

# vgd_alone ARGS...: vgd, run alone in a PID namespace of its own with a /proc of its own, where
# every process there is (vramguard itself) can be read: for what vramguard says when nothing is
# hidden from it, whatever the machine's other processes (a sandbox's init may deny even root).
# Skips without root or unshare.
vgd_alone() {
    [[ $(id -u) -eq 0 ]] || skip "needs root for a PID namespace"
    command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
    if [[ -z ${DEVDIR:-} ]]; then
        _vg_dir || return 1
        DEVDIR=$_VG_DIR/dev
        [[ -d $DEVDIR ]] || vg_fake_dev >/dev/null || return 1
    fi
    run --separate-stderr unshare --pid --fork --mount-proc \
        env -u CUDA_VISIBLE_DEVICES -u CUDA_DEVICE_ORDER \
        "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
}

nfind() {
    json "[.findings[] | select(.rule == \$r)] | length" --arg r "$1"
}

finding_is() {
    json_ok 'any(.findings[]; .rule == $r and .gpus == $g and .pids == $p)' \
        --arg r "$1" --argjson g "$2" --argjson p "$3"
}

rules_fired() {
    json '[.findings[].rule] | unique | join(",")'
}

# no_raw_controls: fails, showing the lines, when $output holds a control character other than
# a newline (what reaches a terminal must be escaped).
no_raw_controls() {
    local re=$'[\x01-\x09\x0b-\x1f\x7f]'
    if LC_ALL=C grep -q "$re" <<<"$output"; then
        echo "raw control characters in the output:"
        LC_ALL=C grep -n "$re" <<<"$output" | cat -A | head -5
        return 1
    fi
}

# show: prints the last command's stdout and stderr (bats shows them when a test fails).
show() {
    printf 'status %s\nstdout:\n%s\nstderr:\n%s\n' "$status" "$output" "${stderr:-}"
}

# UUIDs of the scenarios' GPUs: U0..U7, all different from their first 5 characters on.
U0=GPU-00000000-0000-4000-8000-000000000000
U1=GPU-11111111-1111-4111-8111-111111111111
U2=GPU-22222222-2222-4222-8222-222222222222
U3=GPU-33333333-3333-4333-8333-333333333333

# homogeneous_host [PROC LINES...]: a scenario of four identical GPUs whose minor numbers differ
# from their indices (index i has minor MINOR[i]), followed by the given lines.
MINOR=(2 0 3 1)
homogeneous_host() {
    vg_scenario <<EOF
driver 550.54.15
cuda 12040
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=2 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
gpu index=1 uuid=$U1 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
gpu index=2 uuid=$U2 name="NVIDIA A100-SXM4-80GB" minor=3 bus=00000000:47:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
gpu index=3 uuid=$U3 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:4E:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
$(printf '%s\n' "$@")
EOF
}

# dev GPU: the device node of the GPU with that index in homogeneous_host's scenario.
dev() {
    printf '%s/nvidia%s\n' "$DEVDIR" "${MINOR[$1]}"
}
