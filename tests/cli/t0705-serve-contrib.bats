#!/usr/bin/env bats
# t0705-serve-contrib: the deployment files: the systemd unit passes `systemd-analyze verify`
# and keeps its hardening, the DaemonSet reads the host's /proc read-only without hostPID and
# without taking a GPU, and both start `vramguard serve` with options it accepts.

load lib
load diag
load serve

UNIT=$ROOT/contrib/systemd/vramguard-exporter.service.in
DS=$ROOT/contrib/kubernetes/daemonset.yaml
PM=$ROOT/contrib/kubernetes/podmonitor.yaml

setup() {
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    DEVDIR=$(vg_fake_dev)
    homogeneous_host
}

@test "the systemd unit is valid and hardened" {
    local key
    for key in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes DynamicUser=yes \
        'CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH' \
        'AmbientCapabilities=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH' DevicePolicy=closed \
        PrivateTmp=yes ProtectKernelTunables=yes RestrictNamespaces=yes \
        MemoryDenyWriteExecute=yes 'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' \
        Type=notify WatchdogSec=60s; do
        grep -qxF -- "$key" "$UNIT" || { echo "missing: $key"; return 1; }
    done
    # It must see every process: no hidden /proc.
    run ! grep -Eq '^(ProtectProc=invisible|ProcSubset=pid|PrivateDevices=yes)' "$UNIT"
    command -v systemd-analyze >/dev/null || skip "systemd-analyze is missing (apt-get install systemd)"
    local copy
    copy=$(vg_tmpdir)/vramguard-exporter.service
    # The template filled in as make install does, with the build directory as BINDIR (any
    # prefix: the unit names no path of its own).
    sed "s|@BINDIR@|${VG%/*}|g" "$UNIT" >"$copy"
    run systemd-analyze verify --man=no "$copy"
    printf '%s\n' "$output"
    [ "$status" -eq 0 ]
}

@test "the systemd unit's command line is one serve accepts" {
    local args
    args=$(sed -n 's|^ExecStart=@BINDIR@/vramguard serve ||p' "$UNIT")
    [[ $args == *"--listen 127.0.0.1:19835"* ]]
    # The same options, on a free port.
    # shellcheck disable=SC2086 # split on purpose
    serve_start ${args/--listen 127.0.0.1:19835/}
    scrape
    [ "$SCRAPE_CODE" = 200 ]
}

@test "the DaemonSet reads the host's /proc read-only, without hostPID or a GPU request" {
    grep -q -- '- --proc=/host/proc$' "$DS"
    grep -q 'mountPath: /host/proc$' "$DS"
    grep -A 2 'mountPath: /host/proc$' "$DS" | grep -q 'readOnly: true'
    grep -q 'path: /proc$' "$DS"
    local body # without the comments, which explain what is left out and why
    body=$(grep -v '^ *#' "$DS")
    run ! grep -Eq '^ *hostPID:' <<<"$body"
    run ! grep -q 'nvidia.com/gpu: ' <<<"$body"
    run ! grep -q 'privileged: true' <<<"$body"
    grep -q 'add: \["SYS_PTRACE", "DAC_READ_SEARCH"\]' "$DS"
    grep -q 'drop: \["ALL"\]' "$DS"
    grep -q 'readOnlyRootFilesystem: true' "$DS"
    if command -v python3 >/dev/null && python3 -c 'import yaml' 2>/dev/null; then
        run python3 -c 'import sys, yaml; print(" ".join(d["kind"] for d in yaml.safe_load_all(open(sys.argv[1]))))' "$DS"
        [ "$output" = "Namespace DaemonSet" ]
        run python3 -c 'import sys, yaml; print(" ".join(d["kind"] for d in yaml.safe_load_all(open(sys.argv[1]))))' "$PM"
        [ "$output" = "PodMonitor" ]
    fi
}

@test "the PodMonitor is a file of its own, selecting the DaemonSet's pods and its port" {
    # without the Prometheus Operator's CRDs a PodMonitor fails the whole apply: not in the
    # DaemonSet's file
    run ! grep -q 'kind: PodMonitor' "$DS"
    grep -q '^kind: PodMonitor$' "$PM"
    grep -q 'Prometheus Operator' "$PM"
    grep -q 'app.kubernetes.io/name: vramguard-exporter' "$PM"
    grep -q -- '- port: metrics$' "$PM"
    grep -q 'name: metrics$' "$DS"
    grep -q 'replacement: vramguard$' "$PM"
    [ "$(sed -n 's/^  namespace: //p' "$PM")" = "$(sed -n '/^kind: DaemonSet/,/^spec/s/^  namespace: //p' "$DS")" ]
}

@test "the DaemonSet's arguments are ones serve accepts" {
    local args=() a
    while read -r a; do
        case $a in
        --listen=*) ;;                 # on a free loopback port here
        --proc=/host/proc) args+=(--proc=/proc) ;;
        *) args+=("$a") ;;
        esac
    done < <(sed -n '/^ *args:$/,/^ *env:$/s/^ *- //p' "$DS")
    [ "${args[0]}" = serve ]
    serve_start "${args[@]:1}"
    scrape healthz
    [ "$SCRAPE_CODE" = 200 ]
}
