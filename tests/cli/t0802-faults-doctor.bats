#!/usr/bin/env bats
# t0802-faults-doctor: the NVML fault matrix (tests/cli/faults.bash) against `doctor --json`.
# Always one valid vramguard.doctor/1 document; exit 3 when the driver's view is gone (init,
# count) and nothing critical was found, else the exit status its findings say (2 critical,
# 1 warning, 0 none); no finding names a process that does not exist or blames a process
# for being in another PID namespace because the driver failed.

load lib
load faults

@test "fault matrix: doctor --json" {
    fm_setup
    fm_run doctor --json doctor --no-shell
    local dir=$FM_DIR/doctor files line f id schema avail derr ngpus rules shape pids worst
    local want p
    FM_FAILS=()
    files=("$dir"/*.out)
    jq -r '
        (input_filename | split("/") | last | rtrimstr(".out")) as $id
        | [ $id,
            (.schema == "vramguard.doctor/1"),
            .driver.available,
            ((.driver.error // "") | length > 0),
            .checked.gpus,
            (.findings | map("\(.rule):\(.severity)") | join(" ")),
            ((.findings | all((.title | type == "string" and length > 0)
                and (.evidence | type == "array") and (.fix | type == "array" and length > 0)))
                and .summary.critical == ([.findings[] | select(.severity == "critical")] | length)
                and .summary.warning == ([.findings[] | select(.severity == "warning")] | length)),
            ([.findings[].pids[]] | unique | map(tostring) | join(",")),
            (if any(.findings[]; .severity == "critical") then 2
             elif any(.findings[]; .severity == "warning") then 1 else 0 end)
          ] | map(tostring) | join("|")' "${files[@]}" >"$dir/facts" || {
        echo "jq failed: some document is not valid JSON"
        for f in "${files[@]}"; do jq -e . "$f" >/dev/null 2>&1 || echo "invalid: $f"; done
        return 1
    }
    local -A facts=()
    while IFS= read -r line; do facts[${line%%|*}]=$line; done <"$dir/facts"
    for f in "${files[@]}"; do
        id=${f##*/}
        id=${id%.out}
        if [[ -z ${facts[$id]:-} ]]; then
            fm_fail "$id: no JSON document (exit $(<"$dir/$id.rc")): $(head -c 300 "$dir/$id.err")"
            continue
        fi
        IFS="|" read -r id schema avail derr ngpus rules shape pids worst <<<"${facts[$id]}"
        fm_expect "$id"
        [[ $schema == true && $shape == true ]] || fm_fail "$id: malformed document or finding"
        if ((FM_FATAL_CASE)); then
            fm_common "$dir" "$id" "$(((worst == 2) ? 2 : 3))"
            [[ $avail == false && $derr == true ]] ||
                fm_fail "$id: driver view gone, but available=$avail error=$derr"
        else
            if ((FM_ALL_LOST)); then want=$(((worst == 2) ? 2 : 3)); else want=$worst; fi
            fm_common "$dir" "$id" "$want"
            [[ $avail == true && $ngpus == 3 ]] ||
                fm_fail "$id: expected the driver view with 3 GPUs: available=$avail gpus=$ngpus"
        fi
        for p in ${pids//,/ }; do
            [[ $p == "$FM_A" || $p == "$FM_B" || $p == "$FM_C" ]] ||
                fm_fail "$id: a finding names PID $p, which is none of the holders ($rules)"
        done
        [[ " $rules " != *" foreign-pid:"* ]] ||
            fm_fail "$id: foreign-pid for a process this /proc shows ($rules)"
        printf '%s %s\n' "$id" "$rules" >>"$dir/rules"
    done
    fm_report "doctor --json"
}
