#!/usr/bin/env bats
# t1701-package: the Debian package (debian/). Built with `dpkg-buildpackage -us -uc -b` from a
# copy of the tree (the files git knows, never the checkout itself: no build product lands in
# the work tree), lintian-clean (errors and warnings) and hardened (hardening-check); installed
# with dpkg on this machine, where `vramguard --version` and `vramguard demo` work from the
# package alone (its helper and fake driver under /usr/lib/vramguard) and its units are enabled
# by nobody; then purged, leaving none of its files. The install needs root and a machine
# without a vramguard package of its own: CI. Skipped, with the reason, where the tools are
# missing (scripts/install-deps --test installs them). The package is built from the tree
# whatever VG_BUILD is, so the sanitizer run, the only one CI makes of this file, builds it
# too (tests/run starts this file first: it is the longest).

load lib

bats_require_minimum_version 1.5.0

setup_file() {
    export PKG_SKIP=
    local t
    for t in dpkg-buildpackage dh dpkg-checkbuilddeps; do
        if ! command -v "$t" >/dev/null; then
            PKG_SKIP="$t is missing (scripts/install-deps --test installs dpkg-dev and debhelper)"
            return 0
        fi
    done
    if ! (cd "$ROOT" && dpkg-checkbuilddeps >/dev/null 2>&1); then
        PKG_SKIP="build dependencies missing: $(cd "$ROOT" && dpkg-checkbuilddeps 2>&1 | tail -1)"
        return 0
    fi
    # The copy: what git tracks plus new files not ignored, as they are in the work tree.
    export PKG_DIR=$BATS_FILE_TMPDIR/pkg
    local src=$PKG_DIR/vramguard
    mkdir -p "$src"
    if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$ROOT" && git ls-files -z -co --exclude-standard |
            while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
            tar --null -cf - -T -) | tar -xf - -C "$src"
    else
        tar -C "$ROOT" --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$src"
    fi
    local start=$SECONDS
    # Not the variables of a make that runs this suite (`make SANITIZE=1 check` exports its
    # command line in MAKEFLAGS, which would reach debian/rules' make and build with ASan).
    (cd "$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SANITIZE -u BUILD \
        dpkg-buildpackage -us -uc -b -J"$(nproc)") >"$PKG_DIR/build.log" 2>&1 ||
        echo "dpkg-buildpackage failed: see $PKG_DIR/build.log" >"$PKG_DIR/failed"
    echo "$((SECONDS - start))" >"$PKG_DIR/build-seconds"
    export PKG_VERSION
    PKG_VERSION=$(cat "$ROOT/VERSION")
}

setup() {
    [[ -z $PKG_SKIP ]] || skip "$PKG_SKIP"
    DEB=$(ls "$PKG_DIR"/vramguard_"$PKG_VERSION"_*.deb 2>/dev/null | head -1)
}

@test "the package builds from a copy of the tree; the work tree gets nothing" {
    if [[ -e $PKG_DIR/failed ]]; then tail -40 "$PKG_DIR/build.log"; false; fi
    echo "dpkg-buildpackage: $(cat "$PKG_DIR/build-seconds") s"
    [ -n "$DEB" ] && [ -f "$DEB" ]
    # the version is the project's, and the changelog says so too
    [ "$(dpkg-deb -f "$DEB" Version)" = "$PKG_VERSION" ]
    # nothing of the build in the checkout
    for p in debian/vramguard debian/.debhelper debian/files debian/debhelper-build-stamp; do
        [ ! -e "$ROOT/$p" ] || { echo "left in the work tree: $p"; false; }
    done
    # the set make install gives: binary, man page, units, helper, fake driver, contrib files
    run dpkg-deb -c "$DEB"
    for f in ./usr/bin/vramguard ./usr/share/man/man1/vramguard.1.gz \
        ./lib/systemd/system/vramguard-watch.service \
        ./lib/systemd/system/vramguard-exporter.service \
        ./usr/lib/vramguard/vg-helper ./usr/lib/vramguard/libnvidia-ml.so.1 \
        ./usr/share/vramguard/watch.conf ./usr/share/vramguard/alerts.yml \
        ./usr/share/vramguard/slurm/vramguard-prolog ./usr/share/vramguard/slurm/vramguard-epilog \
        ./usr/share/vramguard/kubernetes/daemonset.yaml ./usr/share/doc/vramguard/copyright \
        ./usr/share/vramguard/kubernetes/podmonitor.yaml ./usr/share/vramguard/grafana/vramguard.json \
        ./usr/share/bash-completion/completions/vramguard \
        ./usr/share/zsh/vendor-completions/_vramguard \
        ./usr/share/fish/vendor_completions.d/vramguard.fish; do
        [[ $output == *" $f"$'\n'* || $output == *" $f" ]] || { echo "missing: $f"; false; }
    done
    # the units start what the package installs
    local x=$BATS_TEST_TMPDIR/x
    dpkg-deb -x "$DEB" "$x"
    grep -qx 'ExecStart=/usr/bin/vramguard watch .*' "$x"/lib/systemd/system/vramguard-watch.service
    grep -qx 'ExecStart=/usr/bin/vramguard serve .*' "$x"/lib/systemd/system/vramguard-exporter.service
}

@test "lintian: no error, no warning" {
    command -v lintian >/dev/null || skip "lintian is missing (scripts/install-deps --test)"
    [ -n "$DEB" ]
    run lintian --allow-root --fail-on error,warning "$DEB"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "hardening-check: PIE, stack protector, fortify, relro, immediate binding" {
    command -v hardening-check >/dev/null || skip "hardening-check is missing (devscripts)"
    [ -n "$DEB" ]
    local x=$BATS_TEST_TMPDIR/x
    dpkg-deb -x "$DEB" "$x"
    # bookworm's dpkg-buildflags has no -fcf-protection: control flow integrity is not asked.
    run hardening-check --nocfprotection "$x"/usr/bin/vramguard "$x"/usr/lib/vramguard/vg-helper \
        "$x"/usr/lib/vramguard/libnvidia-ml.so.1
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "installed with dpkg: --version and demo work, no unit enabled; purged, nothing is left" {
    [ "$(id -u)" -eq 0 ] || skip "installing a package needs root"
    [ -n "$DEB" ]
    if dpkg-query -W -f='${Status}' vramguard 2>/dev/null | grep -q installed; then
        skip "a vramguard package is installed on this machine: not replacing it"
    fi
    [ ! -e /usr/bin/vramguard ] || skip "/usr/bin/vramguard exists (not from a package): not replacing it"
    run dpkg -i "$DEB"
    echo "$output"
    [ "$status" -eq 0 ]
    mapfile -t files < <(dpkg -L vramguard)
    run /usr/bin/vramguard --version
    echo "$output"
    [ "$status" -eq 0 ]
    [[ $output == *"$PKG_VERSION"* ]]
    # demo from the package alone: its helper and fake driver from /usr/lib/vramguard
    run --separate-stderr env -u VRAMGUARD_DEMO_DIR sh -c 'cd / && exec /usr/bin/vramguard demo'
    echo "$output $stderr"
    local demo=$status out=$output
    # shipped, enabled by nobody
    local wants
    wants=$(find /etc/systemd/system -name 'vramguard*' 2>/dev/null)
    run dpkg --purge vramguard
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$demo" -eq 0 ]
    [[ $out == *"Simulation cleaned up"* ]]
    [ -z "$wants" ] || { echo "enabled: $wants"; false; }
    # every file the package had is gone, its own directories too
    local f left=()
    for f in "${files[@]}"; do
        [[ -d $f ]] && continue # directories (/lib is a link to usr/lib) are shared
        [[ -e $f || -L $f ]] && left+=("$f")
    done
    [ ${#left[@]} -eq 0 ] || { printf 'left: %s\n' "${left[@]}"; false; }
    for f in /usr/lib/vramguard /usr/share/vramguard /usr/share/doc/vramguard; do
        [ ! -e "$f" ] || { echo "left: $f"; false; }
    done
    run dpkg-query -W -f='${Status}' vramguard
    [[ $output != *installed* || $output == *not-installed* ]]
}
