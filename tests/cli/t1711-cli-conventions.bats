#!/usr/bin/env bats
# t1711-cli-conventions: what every command line shares. --version anywhere on the line;
# `vramguard help [COMMAND]` printing exactly what --help prints (an unknown command: a usage
# error, 64); an abbreviation that fits more than one option refused with one line naming the
# candidates, while one that fits a single option (or an alias and its option) still works;
# --json honoured by every command: doctor --list prints vramguard.rules/1, pick's document has
# its time, and the commands that print no document (top, run, serve) refuse it (64).

load lib

bats_require_minimum_version 1.5.0

COMMANDS=(status doctor visible watch check demo run pick clean serve top handoff)

@test "--version before the command, after it, and as -V" {
    local want="vramguard $(cat "$ROOT/VERSION")"
    for args in "--version" "-V" "status --version" "doctor --json --version" \
        "pick --version" "run --version" "handoff --version" "help --version"; do
        # shellcheck disable=SC2086 # the words of args are the command line
        run --separate-stderr "$VG" $args
        [ "$status" -eq 0 ] || { echo "$args: exit $status"; false; }
        [ "$output" = "$want" ] || { echo "$args: '$output'"; false; }
        [ -z "$stderr" ]
    done
}

@test "--version after a command's operand is the operand's: run passes it to the job" {
    export VRAMGUARD_RUNTIME_DIR=$(vg_tmpdir)/locks
    vg_scenario <<'SCN'
driver 550.54.15
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=0
SCN
    run_vg run -q -- printf '%s\n' --version
    [ "$status" -eq 0 ]
    [ "$output" = "--version" ]
}

@test "help prints the main help; help COMMAND prints COMMAND --help, byte for byte" {
    run --separate-stderr "$VG" help
    [ "$status" -eq 0 ]
    local main=$output
    run --separate-stderr "$VG" --help
    [ "$output" = "$main" ]
    [[ $main == *"  help       "* ]]
    [[ $main == *"'vramguard help COMMAND'"* ]]
    for c in "${COMMANDS[@]}" help completion; do
        run --separate-stderr "$VG" help "$c"
        [ "$status" -eq 0 ] || { echo "help $c: exit $status"; false; }
        local h=$output
        run --separate-stderr "$VG" "$c" --help
        [ "$output" = "$h" ] || { echo "help $c differs from $c --help"; false; }
        [[ $h == "usage: vramguard "* ]]
    done
}

@test "help with an unknown command or a second word is a usage error (64), one line" {
    run --separate-stderr "$VG" help nosuch
    [ "$status" -eq 64 ]
    [ -z "$output" ]
    [ "$stderr" = "vramguard: help: 'nosuch' is not a vramguard command (see 'vramguard --help')" ]
    run --separate-stderr "$VG" help status doctor
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: help: unexpected argument 'doctor'"* ]]
    [ "${#stderr_lines[@]}" -eq 1 ]
}

@test "an ambiguous abbreviation is refused with its candidates, before and after the command" {
    run --separate-stderr "$VG" --v
    [ "$status" -eq 64 ]
    [ "$stderr" = "vramguard: option '--v' is ambiguous: --verbose, --version (see 'vramguard --help')" ]
    run --separate-stderr "$VG" status --ver
    [ "$status" -eq 64 ]
    [ "$stderr" = "vramguard: status: option '--ver' is ambiguous: --verbose, --version (see 'vramguard status --help')" ]
    # a command's own options: --n fits --nvml, --nvml-timeout and status' --no-nvml
    run --separate-stderr "$VG" status --n=x
    [ "$status" -eq 64 ]
    [ "$stderr" = "vramguard: status: option '--n' is ambiguous: --nvml, --nvml-timeout, --no-nvml (see 'vramguard status --help')" ]
    run --separate-stderr "$VG" doctor --c 1GiB
    [ "$status" -eq 64 ]
    [[ $stderr == *"'--c' is ambiguous: --color, --context-max "* ]]
    [ "${#stderr_lines[@]}" -eq 1 ]
    # an unknown option is still called unknown
    run --separate-stderr "$VG" status --nosuch
    [ "$status" -eq 64 ]
    [ "$stderr" = "vramguard: status: unknown option '--nosuch' (see 'vramguard status --help')" ]
}

@test "an abbreviation of one option (or of an option and its alias) still works" {
    # --verb is --verbose; --col fits --color and its alias --colour: one option
    run_vg --verb --col=never status --no-nv
    [ "$status" -eq 0 ] || [ "$status" -eq 3 ]
    run_vg status --js --no-nv
    [[ $output == *'"schema": "vramguard.status/1"'* ]]
    run --separate-stderr "$VG" pick --form=bogus
    [ "$status" -eq 64 ]
    [[ $stderr == *"--format takes cvd, index or json, not 'bogus'"* ]]
}

@test "every --help lists --version among the global options, and the man page documents help" {
    for c in "${COMMANDS[@]}"; do
        run "$VG" "$c" --help
        [[ $output == *"  --version            print the version and exit"* ]] ||
            { echo "$c --help lacks --version"; false; }
    done
    grep -q '^\.B help' "$ROOT/man/vramguard.1"
    grep -q '^\.B completion' "$ROOT/man/vramguard.1"
}

@test "doctor --list --json is a vramguard.rules/1 document of the same rules as the text list" {
    vg_require_jq
    run --separate-stderr "$VG" doctor --list --json
    [ "$status" -eq 0 ]
    [ "$(jq -r .schema <<<"$output")" = "vramguard.rules/1" ]
    local ids
    ids=$(jq -r '.rules[].id' <<<"$output")
    run "$VG" doctor --list
    [ "$ids" = "$(awk '{print $1}' <<<"$output")" ]
    [ "$(wc -l <<<"$ids")" -ge 10 ]
    # --json before the command, and before --list, mean the same
    run --separate-stderr "$VG" --json doctor --list
    [ "$(jq -r '.rules[].id' <<<"$output")" = "$ids" ]
    run --separate-stderr "$VG" doctor --json --list
    [ "$(jq -r '.rules[].id' <<<"$output")" = "$ids" ]
    # what follows --list is parsed too: a bad option is still a usage error
    run --separate-stderr "$VG" doctor --list --bogus
    [ "$status" -eq 64 ]
}

@test "pick --json carries the time the GPUs were read, like every other document" {
    vg_require_jq
    export VRAMGUARD_RUNTIME_DIR=$(vg_tmpdir)/locks
    vg_scenario <<'SCN'
driver 550.54.15
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=0
SCN
    local before after t
    before=$(date -u +%s)
    run_vg pick --json
    after=$(date -u +%s)
    [ "$status" -eq 0 ]
    t=$(jq -r .time <<<"$output")
    [[ $t =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
    t=$(date -u -d "$t" +%s)
    [ "$t" -ge "$before" ] && [ "$t" -le "$after" ]
    [ "$(jq -r 'keys_unsorted[0:3] | join(",")' <<<"$output")" = "schema,vramguard_version,time" ]
}

@test "top, run and serve, which print no document, refuse --json (64) and say what to use" {
    run --separate-stderr "$VG" --json top
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: top: top is a screen, not a document: use 'vramguard status --json'"* ]]
    run --separate-stderr "$VG" run --json -- true
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: run: run's output is its job's, not a document: use 'vramguard pick --json'"* ]]
    run --separate-stderr "$VG" --json serve --listen 127.0.0.1:0
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: serve: serve answers Prometheus' text format on /metrics, not a document"* ]]
    [ -z "$output" ]
}
