#!/usr/bin/env bats
# t0801-faults-status: the NVML fault matrix (tests/cli/faults.bash) against `status --json`.
# Every function the client calls x 9 error codes, on one device and on all: always one valid
# vramguard.status/1 document; exit 3 with the reason when the driver's view is gone (init,
# count), else exit 0 with the failure listed under its function and code; the other GPUs
# intact; every device-node holder still shown.

load lib
load faults

@test "fault matrix: status --json" {
    fm_setup
    fm_run status --json status
    local dir=$FM_DIR/status files line f id avail derr ngpus intact cboth pids errs msgs lost
    local func code target all_lost
    FM_FAILS=()
    files=("$dir"/*.out)
    # One jq pass over every document: a line of facts each.
    jq -r --arg u2 "$FM_UUID2" --argjson c "$FM_C" '
        (input_filename | split("/") | last | rtrimstr(".out")) as $id
        | [.gpus[]?.errors[]?, .gpus[]?.mig_devices[]?.errors[]?, .driver.errors[]?] as $errs
        | [ $id,
            (.schema == "vramguard.status/1" and .driver.available),
            ((.driver.error // "") | length > 0),
            (.gpus | length),
            (.gpus[2] as $g | $g != null and $g.uuid == $u2 and $g.memory.used != null
                and ($g.errors | length) == 0),
            (.gpus[2].holders // [] | any(.pid == $c and .seen_by == "both")),
            ([.gpus[]?.holders[]?.pid, .gpus[]?.mig_devices[]?.holders[]?.pid,
              .unmatched_holders[]?.holder.pid] | unique | map(tostring) | join(",")),
            ($errs | map("\(.function):\(.code)") | join(" ")),
            ($errs | all(.code as $code | .message | type == "string" and length > 0
                and (if $code == 12345 then test("12345") else true end))),
            ([.gpus[]?.lost] | map(tostring) | join(","))
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
        IFS="|" read -r id avail derr ngpus intact cboth pids errs msgs lost <<<"${facts[$id]}"
        fm_expect "$id"
        func=$FM_FUNC code=$FM_CODE target=$FM_TARGET
        if ((FM_FATAL_CASE)); then
            fm_common "$dir" "$id" 3
            [[ $avail == false && $derr == true && $ngpus == 0 ]] ||
                fm_fail "$id: driver view gone, but available=$avail error=$derr gpus=$ngpus"
        else
            if ((FM_ALL_LOST)); then fm_common "$dir" "$id" 3; else fm_common "$dir" "$id" 0; fi
            all_lost=0
            if [[ $lost == true,true,true ]]; then all_lost=1; fi
            ((all_lost == FM_ALL_LOST)) ||
                fm_fail "$id: GPUs lost: $lost; expected every GPU lost: $FM_ALL_LOST"
            [[ $avail == true && $ngpus == 3 ]] ||
                fm_fail "$id: expected the driver view with 3 GPUs: available=$avail gpus=$ngpus"
            if [[ $target == one || $func == none ]] || ! ((FM_RECORDED)); then
                [[ $intact == true && $cboth == true ]] ||
                    fm_fail "$id: GPU 2 not intact (intact=$intact, holder C both=$cboth): $errs"
            fi
            if ((FM_RECORDED)) && [[ " $errs " != *" $func:$code "* ]]; then
                fm_fail "$id: the failure is not listed as $func:$code (errors: $errs)"
            fi
            if ! ((FM_RECORDED)) && [[ $target == one ]] && [[ $errs == *"$func:"* ]]; then
                fm_fail "$id: a quiet failure was listed as an error: $errs"
            fi
            # A GPU (not a MIG device, not the system) answering GPU_IS_LOST is marked lost.
            if ((code == 15 && FM_RECORDED)) && [[ $func == nvmlDevice* && $func != *InstanceId ]] &&
                [[ $lost != *true* ]]; then
                fm_fail "$id: GPU_IS_LOST did not mark a GPU lost ($lost)"
            fi
        fi
        [[ $msgs == true ]] || fm_fail "$id: an error without a message, or code 12345 unnamed"
        for p in "$FM_A" "$FM_B" "$FM_C"; do
            [[ ,$pids, == *",$p,"* ]] || fm_fail "$id: holder $p missing (holders: $pids)"
        done
    done
    fm_report "status --json"
}
