# shellcheck shell=bash disable=SC2034 # variables set here are for the test files
# tests/cli/faults.bash: the NVML fault matrix shared by t0801-t0803 (`load faults` after
# `load lib`). See docs/reliability.md.
#
# A host of three GPUs (GPU 1 in MIG mode with one MIG device) and three real processes, each
# holding one GPU's device node and listed by the fake driver on it (A on GPU 0 in all three
# process lists, B on MIG device 1/0, C on GPU 2). Every NVML function the client calls is made
# to fail with each code of FM_CODES, on one device and on all of them. fm_run runs one command
# per case and keeps its exit status, stdout, stderr and the fake's call log; the test file
# then goes through the cases (one jq pass over all JSON documents), using fm_expect for what
# each case must show, fm_common for what every run must show, fm_fail to record a failed
# check, and fm_report to print the figures and the failures.
#
# FM_FUNCS rows: FUNCTION BUILD ONE [NEWER...]
#   BUILD  full or legacy: the fake build whose client really calls FUNCTION (the legacy build
#          exports only unversioned symbols, so nvmlInit, nvmlDeviceGetCount, ... are reached)
#   ONE    the selector for the one-device case (gpu=0, gpu=1 for the MIG getters, mig=1/0 for
#          the MIG-handle getters), or - for system functions, which only fail for all
#   NEWER  versioned siblings made NOT_SUPPORTED first, so the client falls back to FUNCTION
FM_FUNCS=(
    "nvmlInit_v2 full -"
    "nvmlInit legacy -"
    "nvmlShutdown full -"
    "nvmlSystemGetDriverVersion full -"
    "nvmlSystemGetNVMLVersion full -"
    "nvmlSystemGetCudaDriverVersion_v2 full -"
    "nvmlSystemGetCudaDriverVersion legacy -"
    "nvmlDeviceGetCount_v2 full -"
    "nvmlDeviceGetCount legacy -"
    "nvmlDeviceGetHandleByIndex_v2 full gpu=0"
    "nvmlDeviceGetHandleByIndex legacy gpu=0"
    "nvmlDeviceGetName full gpu=0"
    "nvmlDeviceGetUUID full gpu=0"
    "nvmlDeviceGetMinorNumber full gpu=0"
    "nvmlDeviceGetPciInfo_v3 full gpu=0"
    "nvmlDeviceGetPciInfo_v2 full gpu=0"
    "nvmlDeviceGetPciInfo legacy gpu=0"
    "nvmlDeviceGetMemoryInfo_v2 full gpu=0"
    "nvmlDeviceGetMemoryInfo full gpu=0 nvmlDeviceGetMemoryInfo_v2"
    "nvmlDeviceGetUtilizationRates full gpu=0"
    "nvmlDeviceGetCudaComputeCapability full gpu=0"
    "nvmlDeviceGetPersistenceMode full gpu=0"
    "nvmlDeviceGetComputeMode full gpu=0"
    "nvmlDeviceGetMigMode full gpu=1"
    "nvmlDeviceGetMaxMigDeviceCount full gpu=1"
    "nvmlDeviceGetMigDeviceHandleByIndex full gpu=1"
    "nvmlDeviceGetGpuInstanceId full mig=1/0"
    "nvmlDeviceGetComputeInstanceId full mig=1/0"
    "nvmlDeviceGetComputeRunningProcesses_v3 full gpu=0"
    "nvmlDeviceGetComputeRunningProcesses_v2 full gpu=0 nvmlDeviceGetComputeRunningProcesses_v3"
    "nvmlDeviceGetComputeRunningProcesses full gpu=0 nvmlDeviceGetComputeRunningProcesses_v3 nvmlDeviceGetComputeRunningProcesses_v2"
    "nvmlDeviceGetGraphicsRunningProcesses_v3 full gpu=0"
    "nvmlDeviceGetGraphicsRunningProcesses_v2 full gpu=0 nvmlDeviceGetGraphicsRunningProcesses_v3"
    "nvmlDeviceGetGraphicsRunningProcesses full gpu=0 nvmlDeviceGetGraphicsRunningProcesses_v3 nvmlDeviceGetGraphicsRunningProcesses_v2"
    "nvmlDeviceGetMPSComputeRunningProcesses_v3 full gpu=0"
    "nvmlDeviceGetMPSComputeRunningProcesses_v2 full gpu=0 nvmlDeviceGetMPSComputeRunningProcesses_v3"
    "nvmlDeviceGetMPSComputeRunningProcesses full gpu=0 nvmlDeviceGetMPSComputeRunningProcesses_v3 nvmlDeviceGetMPSComputeRunningProcesses_v2"
    "nvmlDeviceGetProcessUtilization full gpu=0"
)

# UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION, INSUFFICIENT_SIZE,
# DRIVER_NOT_LOADED, GPU_IS_LOST, UNKNOWN, and a code NVML does not have. Against a sanitizer
# build (slower; CI runs the suite in both builds) only one code per path the client takes:
# NOT_SUPPORTED (quiet or fall back), NO_PERMISSION (its own errno), INSUFFICIENT_SIZE (retry
# loops), GPU_IS_LOST (the GPU marked lost), UNKNOWN (any other), 12345 (no text for it).
# VG_FM_CODES="..." chooses the codes.
if [[ -n ${VG_FM_CODES:-} ]]; then
    read -r -a FM_CODES <<<"$VG_FM_CODES"
elif ldd "$VG" 2>/dev/null | grep -q libasan; then
    FM_CODES=(3 4 7 15 999 12345)
else
    FM_CODES=(1 2 3 4 7 9 15 999 12345)
fi

# Functions whose failure leaves no driver view at all: exit 3.
FM_FATAL=" nvmlInit_v2 nvmlInit nvmlDeviceGetCount_v2 nvmlDeviceGetCount "
# Optional fields: NOT_SUPPORTED only leaves them unknown and is not listed as an error.
FM_OPTIONAL=" nvmlSystemGetDriverVersion nvmlSystemGetNVMLVersion nvmlSystemGetCudaDriverVersion_v2
 nvmlSystemGetCudaDriverVersion nvmlDeviceGetUtilizationRates nvmlDeviceGetCudaComputeCapability
 nvmlDeviceGetPersistenceMode nvmlDeviceGetComputeMode nvmlDeviceGetMigMode
 nvmlDeviceGetMaxMigDeviceCount nvmlDeviceGetMigDeviceHandleByIndex nvmlDeviceGetGpuInstanceId
 nvmlDeviceGetComputeInstanceId nvmlDeviceGetGraphicsRunningProcesses_v3
 nvmlDeviceGetGraphicsRunningProcesses_v2 nvmlDeviceGetGraphicsRunningProcesses
 nvmlDeviceGetMPSComputeRunningProcesses_v3 nvmlDeviceGetMPSComputeRunningProcesses_v2
 nvmlDeviceGetMPSComputeRunningProcesses nvmlDeviceGetProcessUtilization "
# NOT_SUPPORTED makes the client use an older version, which answers.
FM_FALLBACK=" nvmlDeviceGetMemoryInfo_v2 nvmlDeviceGetComputeRunningProcesses_v3
 nvmlDeviceGetComputeRunningProcesses_v2 nvmlDeviceGetGraphicsRunningProcesses_v3
 nvmlDeviceGetGraphicsRunningProcesses_v2 nvmlDeviceGetMPSComputeRunningProcesses_v3
 nvmlDeviceGetMPSComputeRunningProcesses_v2 "

FM_UUID0=GPU-00000000-fa17-0000-0000-000000000000
FM_UUID1=GPU-11111111-fa17-0000-0000-000000000000
FM_UUID2=GPU-22222222-fa17-0000-0000-000000000000
FM_MIG10=MIG-11111111-fa17-0000-0000-000000000010

# fm_setup: the device directory, the three holders (FM_A, FM_B, FM_C) and the base scenario
# text (FM_BASE). FM_DIR is where the cases go. The holders live past the helper's default
# 120 s: a matrix takes minutes on a loaded machine or an ASan build, and a holder that exits
# midway fails every later case (teardown kills them anyway).
fm_setup() {
    FM_DIR=$(vg_tmpdir)/fm
    mkdir -p "$FM_DIR"
    DEVDIR=$(vg_fake_dev "" 4)
    vg_require_jq
    FM_A=$(vg_spawn --lifetime 900 --open "$DEVDIR/nvidia0" --open "$DEVDIR/nvidiactl" --env CUDA_VISIBLE_DEVICES=2 --comm fm-holder-a) || return 1
    FM_B=$(vg_spawn --lifetime 900 --open "$DEVDIR/nvidia1" --open "$DEVDIR/nvidiactl" --comm fm-holder-b) || return 1
    FM_C=$(vg_spawn --lifetime 900 --open "$DEVDIR/nvidia2" --open "$DEVDIR/nvidiactl" --comm fm-holder-c) || return 1
    FM_BASE="driver 550.54.15
nvml 12.550.54.15
cuda 12040
gpu index=0 uuid=$FM_UUID0 name=\"NVIDIA H100 80GB HBM3\" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB used=2GiB util=50 cc=9.0 persistence=1 compute_mode=0 mig=0
gpu index=1 uuid=$FM_UUID1 name=\"NVIDIA A100-SXM4-80GB\" minor=1 bus=00000000:2A:00.0 total=80GiB reserved=512MiB util=10 cc=8.0 persistence=1 compute_mode=0 mig=1
mig parent=1 index=0 uuid=$FM_MIG10 name=\"NVIDIA A100-SXM4-80GB MIG 3g.40gb\" gi=1 ci=0 total=40GiB
gpu index=2 uuid=$FM_UUID2 name=\"NVIDIA H100 80GB HBM3\" minor=2 bus=00000000:3B:00.0 total=80GiB reserved=512MiB util=0 cc=9.0 persistence=1 compute_mode=0 mig=0
proc gpu=0 pid=$FM_A type=compute mem=2GiB sm=40
proc gpu=0 pid=$FM_A type=graphics mem=na
proc gpu=0 pid=$FM_A type=mps mem=1GiB
proc mig=1/0 pid=$FM_B type=compute mem=3GiB
proc gpu=2 pid=$FM_C type=compute mem=4GiB sm=0
"
}

# fm_run NAME ARGS...: runs `vramguard ARGS` for every case into FM_DIR/NAME/ID.{rc,out,err,log}
# where ID is FUNCTION.CODE.TARGET (TARGET one or all); the baseline case (no fault) is
# "none.0.all". Sets FM_NCASES, FM_REACHED (see fm_reached) and FM_NREACHED, and scans the
# outputs (fm_scan, with the patterns in the array FM_SCAN_ERES when set).
fm_run() {
    local dir=$FM_DIR/$1 row func build one code target sel newer lib n faults
    shift
    mkdir -p "$dir"
    FM_NCASES=0 FM_NREACHED=0
    _fm_case "$dir" none.0.all "$FAKE_FULL" "" "$@"
    for row in "${FM_FUNCS[@]}"; do
        read -r func build one newer <<<"$row"
        lib=$FAKE_FULL
        if [[ $build == legacy ]]; then lib=$FAKE_LEGACY; fi
        for code in "${FM_CODES[@]}"; do
            for target in one all; do
                if [[ $target == one ]]; then
                    [[ $one == - ]] && continue
                    sel=" $one"
                else
                    sel=
                fi
                faults=
                for n in $newer; do faults+="error func=$n$sel code=3"$'\n'; done
                faults+="error func=$func$sel code=$code"$'\n'
                _fm_case "$dir" "$func.$code.$target" "$lib" "$faults" "$@"
                FM_NCASES=$((FM_NCASES + 1))
            done
        done
    done
    # Which cases reached their function: one awk over every call log.
    awk 'FNR == 1 { n = split(FILENAME, p, "/"); split(p[n], id, "."); key = p[n] }
        $0 == id[1] && !(key in seen) { seen[key] = 1; sub(/\.log$/, "", key); print key }' \
        "$dir"/*.log >"$dir/reached"
    declare -gA FM_REACHED=()
    local r
    while IFS= read -r r; do FM_REACHED[$r]=1; done <"$dir/reached"
    FM_NREACHED=${#FM_REACHED[@]}
    fm_scan "$dir" "${FM_SCAN_ERES[@]}"
}

# fm_reached ID: the case's function was really called (the client may prefer another symbol).
fm_reached() {
    [[ -n ${FM_REACHED[$1]:-} ]]
}

# _fm_case DIR ID LIB FAULTS ARGS...: one run, bounded in time.
_fm_case() {
    local dir=$1 id=$2 lib=$3 faults=$4 rc=0
    shift 4
    printf '%s%s' "$FM_BASE" "$faults" >"$dir/$id.scen"
    : >"$dir/$id.log"
    FAKE_NVML_SCENARIO=$dir/$id.scen FAKE_NVML_LOG=$dir/$id.log \
        timeout -k 5 60 "$VG" --nvml "$lib" --dev "$DEVDIR" "$@" >"$dir/$id.out" 2>"$dir/$id.err" || rc=$?
    printf '%s\n' "$rc" >"$dir/$id.rc"
}

# _fm_in LIST WORD: WORD is one of the words of LIST.
_fm_in() {
    [[ $1 == *[[:space:]]$2[[:space:]]* ]]
}

# Device functions the client calls on some GPUs only (MIG ones, or MIG device handles).
FM_SOME_GPUS=" nvmlDeviceGetMaxMigDeviceCount nvmlDeviceGetMigDeviceHandleByIndex
 nvmlDeviceGetGpuInstanceId nvmlDeviceGetComputeInstanceId "

# fm_expect ID: for case ID (FUNC.CODE.TARGET) sets FM_FUNC, FM_CODE, FM_TARGET and
#   FM_FATAL_CASE  no driver view at all (init, count): exit 3
#   FM_ALL_LOST    every GPU ends up lost (no handle, or GPU_IS_LOST from a call made on each
#                  GPU): exit 3 for status and doctor
#   FM_RECORDED    the failure must be listed as an error with its function and code
# A case whose function the client never called (it prefers another symbol) expects nothing.
fm_expect() {
    local func code target
    IFS=. read -r func code target <<<"$1"
    FM_FUNC=$func FM_CODE=$code FM_TARGET=$target
    FM_FATAL_CASE=0 FM_RECORDED=1 FM_ALL_LOST=0
    if ! fm_reached "$1"; then
        FM_RECORDED=0
        return 0
    fi
    if [[ $target == all && $func == nvmlDevice* && $func != nvmlDeviceGetCount* ]] &&
        ! _fm_in "$FM_SOME_GPUS" "$func" && [[ $func == *HandleByIndex* || $code == 15 ]]; then
        FM_ALL_LOST=1
    fi
    if _fm_in "$FM_FATAL" "$func"; then FM_FATAL_CASE=1; FM_RECORDED=0; fi
    if [[ $func == nvmlShutdown ]]; then FM_RECORDED=0; fi
    if ((code == 3)) && { _fm_in "$FM_OPTIONAL" "$func" || _fm_in "$FM_FALLBACK" "$func"; }; then
        FM_RECORDED=0
    fi
}

# fm_fail MSG: records a failed check (the caller prints them all at the end).
fm_fail() {
    FM_FAILS+=("$1")
}

# fm_scan DIR [WHERE:ERE...]: reads every case's .rc, .err and .out in one awk pass (a shell
# loop running greps over 600 cases cost more CPU than the cases themselves) and sets, per case
# ID: FM_RC[ID] its exit status; FM_ERRN[ID] its stderr lines; FM_ERRBAD[ID] "1:LINE" for the
# first stderr line not in the house format, else "0:"; FM_GARBAGE[ID] 1 when "(null)" or a
# sanitizer report is in either stream; FM_FIRST[ID] stdout's first line; FM_MATCH[ID,K] 1 when
# some line of the stream WHERE ("out" or "err") matches the K-th ERE (K from 1).
fm_scan() {
    local dir=$1 line id k
    shift
    local -a f
    declare -gA FM_RC=() FM_ERRN=() FM_ERRBAD=() FM_GARBAGE=() FM_FIRST=() FM_MATCH=()
    local eres=
    if (($#)); then eres=$(printf '%s\x1f' "$@"); fi
    while IFS= read -r line; do
        IFS=$'\x1f' read -r -a f <<<"$line"
        id=${f[0]}
        FM_RC[$id]=${f[1]:-} FM_ERRN[$id]=${f[2]:-0} FM_ERRBAD[$id]=${f[3]:-0:}
        FM_GARBAGE[$id]=${f[4]:-0} FM_FIRST[$id]=${f[5]:-}
        for ((k = 1; k <= $#; k++)); do FM_MATCH[$id,$k]=${f[5 + k]:-0}; done
    done < <(awk -v eres="$eres" '
        BEGIN {
            US = "\037"
            n = split(eres, spec, US) - 1
            for (k = 1; k <= n; k++) { where[k] = substr(spec[k], 1, 3); ere[k] = substr(spec[k], 5) }
            garbage = "\\(null\\)|AddressSanitizer|LeakSanitizer|runtime error:|Segmentation"
        }
        FNR == 1 {
            name = FILENAME; sub(/.*\//, "", name)
            ext = name; sub(/.*\./, "", ext)
            id = name; sub(/\.[^.]*$/, "", id)
            ids[id] = 1
        }
        ext == "rc" && FNR == 1 { rc[id] = $0 }
        ext == "err" {
            nerr[id]++
            if (!(id in hasbad) && index($0, "vramguard: ") != 1) { hasbad[id] = 1; bad[id] = $0 }
        }
        ext == "out" && FNR == 1 { first[id] = $0 }
        (ext == "out" || ext == "err") && $0 ~ garbage { g[id] = 1 }
        ext == "out" || ext == "err" {
            for (k = 1; k <= n; k++) if (where[k] == ext && $0 ~ ere[k]) m[id, k] = 1
        }
        END {
            for (id in ids) {
                b = (id in hasbad) ? "1:" bad[id] : "0:"
                f1 = first[id]
                gsub(US, " ", b); gsub(US, " ", f1)
                line = id US rc[id] US (nerr[id] + 0) US b \
                    US (g[id] + 0) US f1
                for (k = 1; k <= n; k++) line = line US (m[id, k] + 0)
                print line
            }
        }' "$dir"/*.rc "$dir"/*.err "$dir"/*.out)
}

# fm_common DIR ID ALLOWED: checks every command must pass (from fm_scan's record of DIR): the
# exit status is one of ALLOWED (never a signal or a sanitizer abort), stderr holds only
# "vramguard: " lines, no "(null)" or sanitizer report anywhere.
fm_common() {
    local dir=$1 id=$2 allowed=$3 rc
    rc=${FM_RC[$id]:-}
    if [[ " $allowed " != *" $rc "* ]]; then
        fm_fail "$id: exit $rc, expected one of: $allowed; stderr: $(head -c 600 "$dir/$id.err")"
    fi
    if [[ ${FM_ERRBAD[$id]:-0:} == 1:* ]]; then
        fm_fail "$id: stderr line not in the house format: ${FM_ERRBAD[$id]#1:}"
    fi
    if [[ ${FM_GARBAGE[$id]:-0} == 1 ]]; then
        fm_fail "$id: garbage or a sanitizer report in the output"
    fi
}

# fm_report: prints a summary to the TAP stream and fails (listing up to 40) when any check did.
fm_report() {
    local what=$1
    echo "# $what: $FM_NCASES fault cases (+1 baseline), $FM_NREACHED reached the failing call" >&3
    if ((${#FM_FAILS[@]})); then
        printf '%s\n' "${FM_FAILS[@]:0:40}"
        echo "${#FM_FAILS[@]} failed checks"
        return 1
    fi
}
