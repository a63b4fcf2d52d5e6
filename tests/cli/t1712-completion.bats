#!/usr/bin/env bats
# t1712-completion: `vramguard completion bash|zsh|fish`. The bash script is sourced and its
# function called as bash calls it (COMP_WORDS, COMP_CWORD; COMPREPLY read back): commands,
# options, the words an option takes, operands. Every option each command's --help lists is
# offered by each shell's script (they come from the same tables). zsh's and fish's scripts
# are parse-checked (zsh -n, fish -n) and fish's completions asked for (complete -C); skipped,
# with the reason, where the shell is missing (scripts/install-deps --test installs both).

load lib

bats_require_minimum_version 1.5.0

COMMANDS=(status doctor visible watch check demo run pick clean serve top handoff)

setup() {
    TMP=$(vg_tmpdir)
    "$VG" completion bash >"$TMP/vramguard.bash"
    "$VG" completion zsh >"$TMP/_vramguard"
    "$VG" completion fish >"$TMP/vramguard.fish"
}

# bash_complete WORD...: the completions bash offers for the command line WORD... (the last
# word is the one being completed, "" for a new one), one a line, sorted.
bash_complete() {
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
        _vramguard vramguard; printf "%s\n" "${COMPREPLY[@]}" | sort -u' \
        _ "$TMP/vramguard.bash" "$@"
}

# help_opts COMMAND: the long options COMMAND --help lists, one a line.
help_opts() {
    "$VG" "$1" --help | grep -oE '^  (-[A-Za-z], )?--[a-z][a-z-]*' | sed 's/.*--/--/'
}

@test "bash: complete -p names the function once the script is sourced" {
    run bash -c 'source "$1"; complete -p vramguard' _ "$TMP/vramguard.bash"
    [ "$status" -eq 0 ]
    [ "$output" = "complete -F _vramguard vramguard" ]
    bash -n "$TMP/vramguard.bash"
}

@test "bash: a partial command, a partial option, a command's options" {
    run bash_complete vramguard do
    [ "$output" = "doctor" ]
    run bash_complete vramguard ""
    [ "${#lines[@]}" -eq 13 ]
    [[ " ${lines[*]} " == *" status "* && " ${lines[*]} " == *" help "* ]]
    [[ " ${lines[*]} " != *" completion "* ]] # hidden
    run bash_complete vramguard doctor --li
    [ "$output" = "--list" ]
    run bash_complete vramguard --json doctor --no
    [ "$output" = "--no-shell" ]
    run bash_complete vramguard status --
    [[ $'\n'$output$'\n' == *$'\n--no-nvml\n'* && $'\n'$output$'\n' == *$'\n--json\n'* ]]
    [[ $'\n'$output$'\n' != *$'\n--list\n'* ]] # doctor's, not status'
    run bash_complete vramguard --ver
    [ "$output" = $'--verbose\n--version' ]
    run bash_complete vramguard pick -
    [[ $'\n'$output$'\n' == *$'\n-n\n'* ]]
}

@test "bash: option values from the tables, as --opt VALUE and --opt=VALUE" {
    run bash_complete vramguard pick --format ""
    [ "$output" = $'cvd\nindex\njson' ]
    run bash_complete vramguard pick --format = j
    [ "$output" = "json" ]
    run bash_complete vramguard --color = al
    [ "$output" = "always" ]
    run bash_complete vramguard top --sort c
    [ "$output" = $'command\ncpu' ]
    run bash_complete vramguard run --track ""
    [ "$output" = $'auto\ncgroup\nsubreaper' ]
    run bash_complete vramguard visible --order P
    [ "$output" = "PCI_BUS_ID" ]
    run bash_complete vramguard watch --format ""
    [ "$output" = $'json\ntext' ]
    # a DIR: directories
    mkdir -p "$TMP/procdir" && : >"$TMP/procfile"
    run bash_complete vramguard --proc "$TMP/proc"
    [ "$output" = "$TMP/procdir" ]
    # the value of a global option before the command is not the command
    run bash_complete vramguard --nvml-timeout 5s doctor --li
    [ "$output" = "--list" ]
    # a value with nothing to offer offers nothing, not options or commands
    run bash_complete vramguard doctor --gpu ""
    [ -z "$output" ]
}

@test "bash: operands: handoff's verbs, help's commands, completion's shells, run's program" {
    run bash_complete vramguard handoff ""
    [ "$output" = $'epilog\nnode\nprolog' ]
    run bash_complete vramguard handoff epilog --dr
    [ "$output" = "--drain" ]
    run bash_complete vramguard help pi
    [ "$output" = "pick" ]
    run bash_complete vramguard completion ""
    [ "$output" = $'bash\nfish\nzsh' ]
    # run: the job's command, then its own words (files), never run's options
    run bash_complete vramguard run --gpus 0 bas
    [[ $'\n'$output$'\n' == *$'\nbash\n'* ]]
    run bash_complete vramguard run bash --gp
    [ -z "$output" ]
}

@test "every option each command's --help lists is in each shell's script" {
    for c in "${COMMANDS[@]}"; do
        local o
        run bash_complete vramguard "$c" -
        local offered=$'\n'$output$'\n'
        while read -r o; do
            [[ $offered == *$'\n'"$o"$'\n'* ]] || { echo "bash: $c $o missing"; false; }
            grep -qF "'$o" "$TMP/_vramguard" || { echo "zsh: $c $o missing"; false; }
            grep -qF -- "-l ${o#--}" "$TMP/vramguard.fish" || { echo "fish: $c $o missing"; false; }
        done < <(help_opts "$c")
    done
}

@test "zsh: the script parses and lists each command with its summary" {
    command -v zsh >/dev/null || skip "zsh is missing (scripts/install-deps --test installs it)"
    zsh -n "$TMP/_vramguard"
    [ "$(head -1 "$TMP/_vramguard")" = "#compdef vramguard" ]
    grep -qF "'doctor:why memory is held, and what to do about it'" "$TMP/_vramguard"
    grep -qF "'--format=[cvd: UUIDs, comma-separated (default); index: nvidia-smi indices;]:FMT:(cvd index json)'" "$TMP/_vramguard"
    grep -qF "'--proc=[procfs to read (default /proc), e.g. a host'\\''s /proc in a container]:DIR:_files -/'" "$TMP/_vramguard"
    # it loads as a completion function in a zsh with compinit
    run zsh -fc 'fpath=("$1" $fpath); autoload -Uz compinit && compinit -u -d "$1/.zcompdump" &&
        print -r -- $_comps[vramguard]' _ "$TMP"
    [ "$status" -eq 0 ]
    [ "$output" = "_vramguard" ]
}

@test "fish: the script parses and completes commands, options and values" {
    command -v fish >/dev/null || skip "fish is missing (scripts/install-deps --test installs it)"
    fish -n "$TMP/vramguard.fish"
    fc() {
        HOME=$TMP XDG_CONFIG_HOME=$TMP/config XDG_DATA_HOME=$TMP/data fish --no-config -c \
            'source $argv[1]; complete -C $argv[2]' "$TMP/vramguard.fish" "$1" | cut -f1 | sort
    }
    run fc "vramguard do"
    [ "$output" = "doctor" ]
    run fc "vramguard doctor --li"
    [ "$output" = "--list" ]
    run fc "vramguard pick --format "
    [ "$output" = $'cvd\nindex\njson' ]
    run fc "vramguard handoff "
    [ "$output" = $'epilog\nnode\nprolog' ]
}

@test "completion: a missing, unknown or second shell is a usage error" {
    run --separate-stderr "$VG" completion
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: completion: which shell: bash, zsh or fish?"* ]]
    run --separate-stderr "$VG" completion tcsh
    [ "$status" -eq 64 ]
    [ "$stderr" = "vramguard: completion: no completion for 'tcsh': bash, zsh or fish" ]
    run --separate-stderr "$VG" completion bash zsh
    [ "$status" -eq 64 ]
    [ -z "$output" ]
}
