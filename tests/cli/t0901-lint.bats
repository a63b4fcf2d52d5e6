#!/usr/bin/env bats
# t0901-lint: scripts/lint (what `make lint` runs) over small fake source trees: one violation of
# each kind is reported as file:line with its reason and fails the run, a clean tree passes, and
# the format check (LINT_FORMAT_FILES) fails on the files given that clang-format would change.

ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
LINT=$ROOT/scripts/lint

setup() {
    T=$(mktemp -d "${BATS_TMPDIR:-/tmp}/vg-lint.XXXXXX")
    mkdir -p "$T/src/util" "$T/src/model" "$T/src/render" "$T/src/act" "$T/src/gpu" "$T/src/proc"
    # a clean tree: every include downward, open() with O_CLOEXEC, a short function, and a long one
    # that says why
    cat >"$T/src/util/buf.h" <<'EOF'
/* util: no includes of the project */
int vg_buf_len(void);
EOF
    cat >"$T/src/model/snap.c" <<'EOF'
/* model: uses util and gpu and proc */
#include <fcntl.h>
#include "util/buf.h"
#include "gpu/gpu.h"
#include "proc/proc.h"
#include "model/snap.h"

int vg_snap_open(const char *p)
{
    /* atoi( in a comment is no call, and neither is "strcpy(" in a string */
    return open(p, O_RDONLY | O_CLOEXEC);
}
EOF
    {
        echo '#include "act/act.h"'
        echo '#include "rules/rules.h"'
        echo
        echo '/* long: one table, read top to bottom */'
        echo 'int vg_render_all(void)'
        echo '{'
        for i in $(seq 100); do echo "    vg_buf_len();"; done
        echo '}'
    } >"$T/src/render/all.c"
    printf 'int vg_act_x(void);\n' >"$T/src/act/act.h"
}

teardown() {
    rm -rf "$T"
}

@test "a clean tree passes with no output" {
    run "$LINT" "$T/src"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "an include of a higher layer is reported with file and line" {
    printf '/* x */\n#include "util/buf.h"\n#include "act/act.h"\n' >"$T/src/render/bad.h"
    printf '/* x */\n#include "render/render.h"\n' >"$T/src/act/bad.c"
    run "$LINT" "$T/src"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/src/act/bad.c:2: act/ includes render/ (a higher layer)"* ]]
    # render -> act is downward: not reported
    [[ "$output" != *"bad.h"* ]]
}

@test "gpu and proc never include each other" {
    printf '#include "proc/proc.h"\n' >"$T/src/gpu/nv.c"
    printf '#include "util/buf.h"\n#include "gpu/gpu.h"\n' >"$T/src/proc/p.c"
    run "$LINT" "$T/src"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/src/gpu/nv.c:1: gpu/ includes proc/ (a sibling layer)"* ]]
    [[ "$output" == *"$T/src/proc/p.c:2: proc/ includes gpu/ (a sibling layer)"* ]]
}

@test "a folder that is not a layer is reported" {
    mkdir "$T/src/watch"
    printf 'int x;\n' >"$T/src/watch/engine.c"
    run "$LINT" "$T/src"
    [ "$status" -eq 1 ]
    [[ "$output" == *"src/watch/ is not a layer"* ]]
}

@test "banned functions are reported, comments and strings and longer names are not" {
    cat >"$T/src/util/bad.c" <<'EOF'
/* sprintf( here is prose */
int f(char *d, const char *s)
{
    const char *m = "atoi(";
    vg_atoi(s);
    x.strcpy(d, s);
    strcpy(d, s);
    return atoi(s) + (int)m[0];
}
EOF
    run "$LINT" "$T/src"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/src/util/bad.c:7: banned function strcpy()"* ]]
    [[ "$output" == *"$T/src/util/bad.c:8: banned function atoi()"* ]]
    [ "$(grep -c 'banned' <<<"$output")" -eq 2 ]
}

@test "open() and openat() without O_CLOEXEC are reported" {
    cat >"$T/src/proc/o.c" <<'EOF'
int f(int dfd)
{
    int a = open("/proc/x", O_RDONLY);
    const int flags = O_RDONLY | O_CLOEXEC;
    int b = openat(dfd, "y", flags);
    return a + b;
}
EOF
    run "$LINT" "$T/src"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/src/proc/o.c:3: open() without O_CLOEXEC"* ]]
    [[ "$output" != *"o.c:5"* ]]
}

@test "a function over 80 lines without a long: comment is reported" {
    {
        echo '/* what it does, but not why it is long */'
        echo 'static int'
        echo 'vg_model_big(int a)'
        echo '{'
        for i in $(seq 81); do echo "    a++;"; done
        echo '    return a;'
        echo '}'
        echo
        echo 'int vg_model_short(void)'
        echo '{'
        for i in $(seq 80); do echo "    ;"; done
        echo '}'
    } >"$T/src/model/big.c"
    run "$LINT" "$T/src"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/src/model/big.c:2: function vg_model_big is 82 lines (over 80"* ]]
    [[ "$output" != *"vg_model_short"* ]]
    [[ "$output" != *"vg_render_all"* ]]
}

@test "the format check fails on the files given that are not formatted, and only those" {
    command -v clang-format >/dev/null || skip "no clang-format"
    cp "$ROOT/.clang-format" "$T/"
    printf 'int  f( void ){return 0;}\n' >"$T/src/util/ugly.c"
    LINT_FORMAT_FILES="$T/src/util/ugly.c" run "$LINT" "$T/src"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$T/src/util/ugly.c:1: not clang-formatted"* ]]
    printf 'int f(void)\n{\n    return 0;\n}\n' >"$T/src/util/ugly.c"
    LINT_FORMAT_FILES="$T/src/util/ugly.c" run "$LINT" "$T/src"
    [ "$status" -eq 0 ]
    # not listed: not checked
    run "$LINT" "$T/src"
    [ -z "$output" ]
}

@test "the source root defaults to src/ of the current directory" {
    cd "$T"
    run "$LINT"
    [ "$status" -eq 0 ]
    mkdir src/serve
    run "$LINT"
    [ "$status" -eq 1 ]
    [[ "$output" == *"src/serve/ is not a layer"* ]]
}
