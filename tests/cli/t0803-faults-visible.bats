#!/usr/bin/env bats
# t0803-faults-visible: the NVML fault matrix (tests/cli/faults.bash) against `visible`.
# "0,1,2" in PCI order on the three GPUs: exit 3 with one clear line on stderr when the driver's
# view is gone (init, count); else the resolution, exit 0, whatever field the driver failed to
# give; never a "(null)", never a suggested value with a placeholder in it.

load lib
load faults

@test "fault matrix: visible" {
    fm_setup
    # fm_scan's patterns, by number: 1 cuda:2 in stdout, 2 a suggested value with a
    # placeholder, 3 stderr saying the driver is missing.
    FM_SCAN_ERES=('out:cuda:2' 'out:CUDA_VISIBLE_DEVICES=[^ ]*[?]' 'err:^vramguard: visible: .*driver')
    fm_run visible visible 0,1,2 --order PCI_BUS_ID
    local dir=$FM_DIR/visible f id
    FM_FAILS=()
    for f in "$dir"/*.out; do
        id=${f##*/}
        id=${id%.out}
        fm_expect "$id"
        if ((FM_FATAL_CASE)); then
            fm_common "$dir" "$id" 3
            [[ ! -s $f && ${FM_ERRN[$id]} -eq 1 ]] ||
                fm_fail "$id: expected one line on stderr and nothing on stdout"
            [[ ${FM_MATCH[$id,3]} == 1 ]] ||
                fm_fail "$id: the message does not say the driver is missing: $(<"$dir/$id.err")"
        else
            fm_common "$dir" "$id" 0
            [[ ${FM_FIRST[$id]} == "CUDA_VISIBLE_DEVICES='0,1,2', CUDA_DEVICE_ORDER=PCI_BUS_ID"* ]] ||
                fm_fail "$id: unexpected first line: ${FM_FIRST[$id]}"
            [[ ${FM_MATCH[$id,1]} == 1 ]] || fm_fail "$id: cuda:2 missing"
            [[ ${FM_MATCH[$id,2]} == 0 ]] ||
                fm_fail "$id: a suggested value with a placeholder: $(grep -E 'CUDA_VISIBLE_DEVICES=[^ ]*\?' "$f")"
        fi
    done
    fm_report "visible"
}
