# top.bash: helpers for the tests of `vramguard top` (t15xx): it runs in a tmux window on a
# private socket, the screen is read with capture-pane and keys sent with send-keys. The test
# file's setup sets SOCK (and SOCKS, every socket used, for its teardown to kill) and loads lib.
#
# top_start W H [PREFIX...] -- [TOP ARGS...]   start top in a W x H window, wait for its key line
# top_again                                    end the session; the next top_start gets a new one
# screen [capture-pane options]                the screen as text
# wait_screen TEXT / wait_gone TEXT            until the screen shows / no longer shows TEXT
# lacks ERE [options]                          the screen does not match ERE
# keys KEY...                                  tmux send-keys
# row PID                                      the holder line of PID on the screen
# alive PID                                    PID still runs

# top_again: end the session and start the next on a fresh socket (no race with the old
# server's exit).
top_again() {
    tmux -L "$SOCK" kill-server 2>/dev/null || true
    SOCK=$SOCK.${#SOCKS[@]}
    SOCKS+=("$SOCK")
}

# top_start W H [PREFIX...] -- [TOP ARGS...]: vramguard top in a W x H tmux window, then the
# exit status as "TOP-EXIT=N" on the screen (the window stays). PREFIX: env or setpriv words.
top_start() {
    local w=$1 h=$2 pre=()
    shift 2
    while [[ $# -gt 0 && $1 != -- ]]; do
        pre+=("$1")
        shift
    done
    shift
    local cmd
    printf -v cmd '%q ' env FAKE_NVML_SCENARIO="$FAKE_NVML_SCENARIO" "${pre[@]}" \
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --nvml-timeout 1s top "$@"
    tmux -L "$SOCK" -f /dev/null new-session -d -x "$w" -y "$h" "$cmd; echo TOP-EXIT=\$?; sleep 600"
    wait_screen "q quit"
}

screen() {
    tmux -L "$SOCK" capture-pane -p "$@"
}

# wait_screen TEXT: until the screen shows TEXT (fixed string).
wait_screen() {
    wait_for "screen | grep -qF -- $(printf '%q' "$1")"
}

# wait_gone TEXT: until the screen no longer shows TEXT.
wait_gone() {
    wait_for "! screen | grep -qF -- $(printf '%q' "$1")"
}

# lacks ERE [capture-pane options]: the screen does not match ERE.
lacks() {
    local text=$1
    shift
    ! screen "$@" | grep -qE -- "$text"
}

# alive PID: PID still runs (a function: a bare `! cmd` never fails a bats test).
alive() {
    ! vg_gone "$1"
}

keys() {
    tmux -L "$SOCK" send-keys "$@"
}

# The row of PID on the screen.
row() {
    screen | grep -E "^ *$1 " || true
}

