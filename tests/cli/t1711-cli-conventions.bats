#!/usr/bin/env bats
# t1711-cli-conventions: what every command line shares. --version anywhere on the line;
# `vramguard help [COMMAND]` printing exactly what --help prints (an unknown command: a usage
# error, 64); an abbreviation that fits more than one option refused with one line naming the
# candidates, while one that fits a single option (or an alias and its option) still works.

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
