#!/usr/bin/env bats
# t1714-container: contrib/container/Containerfile without a container engine (none is
# installed by scripts/install-deps: podman's packages bring services and a network pull of
# debian:12). What can be checked here is checked: the build stage installs exactly the build
# packages of scripts/install-deps and runs the README's make commands; `make install-strip
# DESTDIR=... PREFIX=/usr` (the stage's command, outside a chroot) yields every path the run
# stage COPYs; the run stage's packages provide every library the binary needs; and the
# DaemonSet's image and port are the ones the Containerfile builds and exposes.

load lib

CF=$ROOT/contrib/container/Containerfile
DS=$ROOT/contrib/kubernetes/daemonset.yaml

setup() {
    TMP=$(vg_tmpdir)
}

# the stage of the Containerfile that starts at FROM ... AS NAME (or the last one: "run")
stage() {
    if [ "$1" = run ]; then
        awk '/^FROM /{n++} n==2' "$CF"
    else
        awk -v s="$1" '/^FROM /{on = ($0 ~ (" AS " s "$"))} on' "$CF"
    fi
}

@test "two stages on Debian 12; the build stage installs scripts/install-deps's build and kernel-scan packages" {
    [ "$(grep -c '^FROM ' "$CF")" -eq 2 ]
    grep -qx 'FROM docker.io/library/debian:12 AS build' "$CF"
    grep -qx 'FROM docker.io/library/debian:12-slim' "$CF"
    local want got
    want=$({
        sed -n '/^build_pkgs=(/,/^)/p' "$ROOT/scripts/install-deps"
        sed -n 's/^bpf_pkgs=(\(.*\))$/\1/p' "$ROOT/scripts/install-deps"
    } | sed 's/#.*//' | grep -v -e 'build_pkgs=(' -e '^)' | tr -s ' \n' '\n' | grep . | sort |
        tr '\n' ' ')
    got=$(stage build | sed -n '/apt-get install/,/rm -rf/p' | tr -s ' \\\n' '\n' |
        grep -v -e '^-' -e '^&&' -e apt-get -e install -e '^rm$' -e '^/var' | grep . | sort |
        tr '\n' ' ')
    [ "$got" = "$want" ] || { echo "Containerfile: $got"; echo "install-deps: $want"; return 1; }
    stage build | grep -q 'make install-strip DESTDIR=/out PREFIX=/usr'
}

@test "the build stage's install yields every path the run stage copies" {
    local dest=$TMP/out src paths=0
    # The stage's command, outside a chroot, from this build (PKGLIBDIR as built, so nothing
    # under test is rebuilt; it is not among what the image takes).
    # (the sanitizer build's objects link only with its flags: SANITIZE=1 for build-san)
    local san=0
    if grep -q __asan_init "$VG"; then san=1; fi
    make -C "$ROOT" -s install-strip DESTDIR="$dest" PREFIX=/usr BUILD="$VG_BUILD" SANITIZE=$san \
        PKGLIBDIR="$(cat "$VG_BUILD/pkglibdir.stamp")" >/dev/null
    while read -r src; do
        [ -f "$dest${src#/out}" ] || { echo "missing in the install: $src"; return 1; }
        paths=$((paths + 1))
    done < <(sed -n 's|^COPY --from=build \(/out/[^ ]*\) .*|\1|p' "$CF")
    [ "$paths" -ge 1 ]
    grep -q '^COPY --from=build /out/usr/bin/vramguard /usr/bin/vramguard$' "$CF"
    # the installed binary is the stripped build and runs
    run "$dest/usr/bin/vramguard" --version
    [ "$status" -eq 0 ]
    [[ $output == *"$(cat "$ROOT/VERSION")"* ]]
}

# owner PATH: the package that owns a library, however merged-/usr spells its path
owner() {
    local real c
    real=$(readlink -f "$1")
    for c in "$1" "$real" "${real#/usr}" "/usr${1#/usr}"; do
        dpkg -S "$c" 2>/dev/null | head -n 1 | cut -d: -f1 | grep . && return 0
    done
    return 0
}

@test "the run stage's packages provide every library the binary needs" {
    command -v readelf >/dev/null || skip "readelf is missing (apt-get install binutils)"
    command -v dpkg >/dev/null || skip "not a Debian system"
    local pkgs lib path pkg LDCONFIG
    # /sbin is not in an ordinary user's PATH on Debian
    LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
    pkgs=" $(stage run | sed -n '/apt-get install/,/rm -rf/p' | tr -s ' \\\n' '\n' |
        grep -v -e '^-' -e '^&&' -e apt-get -e install -e '^rm$' -e '^/var' | grep . | tr '\n' ' ') "
    for lib in $(readelf -d "$VG" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        # the sanitizer build's runtimes are not the shipped binary's
        case $lib in libasan.so* | libubsan.so*) continue ;; esac
        path=$("$LDCONFIG" -p | awk -v l="$lib" '$1 == l && /x86-64|AArch64|,/ {print $NF; exit}')
        [ -n "$path" ] || path=$("$LDCONFIG" -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
        pkg=$(owner "$path")
        [ -n "$pkg" ] || { echo "$lib ($path): no package owns it"; return 1; }
        # libc6 and libtinfo6 are Priority: required, in every Debian image
        case " libc6 libtinfo6 $pkgs " in
        *" $pkg "*) ;;
        *) echo "$lib ($pkg) is not installed by the run stage"; return 1 ;;
        esac
    done
}

@test "the DaemonSet runs the image's binary on the port the image exposes" {
    grep -q 'binary at /usr/bin/vramguard' "$DS"
    grep -q 'contrib/container/Containerfile' "$DS"
    local port
    port=$(sed -n 's/^EXPOSE //p' "$CF")
    [ "$port" = 19835 ]
    grep -q -- "- --listen=0.0.0.0:$port\$" "$DS"
    grep -q "containerPort: $port\$" "$DS"
    grep -qx 'ENTRYPOINT \["/usr/bin/vramguard"\]' "$CF"
}
