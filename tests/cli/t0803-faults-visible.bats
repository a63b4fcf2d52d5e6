#!/usr/bin/env bats
# t0803-faults-visible: the NVML fault matrix (tests/cli/faults.bash) against `visible`.
# "0,1,2" in PCI order on the three GPUs: exit 3 with one clear line on stderr when the driver's
# view is gone (init, count); else the resolution, exit 0, whatever field the driver failed to
# give; never a "(null)", never a suggested value with a placeholder in it.

load lib
load faults

@test "fault matrix: visible" {
    fm_setup
    fm_run visible visible 0,1,2 --order PCI_BUS_ID
    local dir=$FM_DIR/visible f id nerr first
    FM_FAILS=()
    for f in "$dir"/*.out; do
        id=${f##*/}
        id=${id%.out}
        fm_expect "$id"
        nerr=$(wc -l <"$dir/$id.err")
        first=$(head -n 1 "$f")
        if ((FM_FATAL_CASE)); then
            fm_common "$dir" "$id" 3
            [[ ! -s $f && $nerr -eq 1 ]] ||
                fm_fail "$id: expected one line on stderr and nothing on stdout"
            grep -q "^vramguard: visible: .*driver" "$dir/$id.err" ||
                fm_fail "$id: the message does not say the driver is missing: $(<"$dir/$id.err")"
        else
            fm_common "$dir" "$id" 0
            [[ $first == "CUDA_VISIBLE_DEVICES='0,1,2', CUDA_DEVICE_ORDER=PCI_BUS_ID"* ]] ||
                fm_fail "$id: unexpected first line: $first"
            grep -q 'cuda:2' "$f" || fm_fail "$id: cuda:2 missing"
            ! grep -qE 'CUDA_VISIBLE_DEVICES=[^ ]*\?' "$f" ||
                fm_fail "$id: a suggested value with a placeholder: $(grep -E 'CUDA_VISIBLE_DEVICES=[^ ]*\?' "$f")"
        fi
    done
    fm_report "visible"
}
