#!/bin/sh
# Fetch Debian's LibreOffice help in one language (real HTML pages with real relative links) into
# the topiccrawl cache, for the `htmltree:` corpus reader. LANG is a packaged help language, as in
# the package name libreoffice-help-<lang>: zh-CN (default, ~2,561 pages), zh-TW, de, fr, ja, en-US...
# Idempotent: does nothing when already extracted. Prints the path of the `text/` directory:
#   scrapy serveweb "htmltree:$(scripts/fetch-libreoffice-help.sh zh-TW)?opaque=1&labeldepth=1"
# Needs apt-get and dpkg-deb (Debian/Ubuntu); never writes outside the cache directory.
set -eu

LANG_ARG="${1:-zh-CN}"
case "$LANG_ARG" in
    -h|--help)
        echo "usage: $0 [LANG]   (LANG: zh-CN by default; zh-TW, de, fr, ja, en-US, ...)"
        exit 0 ;;
esac
if ! printf '%s' "$LANG_ARG" | grep -Eq '^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?$'; then
    echo "error: LANG must look like zh-CN, zh-TW or de, got '$LANG_ARG'" >&2
    exit 2
fi
LOWER=$(printf '%s' "$LANG_ARG" | tr 'A-Z' 'a-z')
PKG="libreoffice-help-$LOWER"
CACHE="${TOPICCRAWL_CACHE:-$HOME/.cache/topiccrawl}"
DEST="$CACHE/$PKG"

# the help directory of the extracted package, whatever the case of its language folder (zh-CN, de)
find_text() {
    for dir in "$1"/usr/share/libreoffice/help/*/text; do
        name=$(basename "$(dirname "$dir")" | tr 'A-Z' 'a-z')
        if [ -d "$dir" ] && [ "$name" = "$LOWER" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

if ! TEXT=$(find_text "$DEST"); then
    mkdir -p "$CACHE"
    WORK=$(mktemp -d "$CACHE/.lo-help.XXXXXX")
    chmod 755 "$WORK"  # lets apt-get download as the _apt user
    trap 'rm -rf "$WORK"' EXIT
    cd "$WORK"
    if ! apt-get download "$PKG" >&2; then
        echo "apt-get download $PKG failed; running apt-get update and retrying" >&2
        apt-get update >&2 || true
        apt-get download "$PKG" >&2 || {
            echo "error: no package $PKG (see: apt-cache search libreoffice-help-)" >&2
            exit 1
        }
    fi
    dpkg-deb -x "$PKG"_*.deb "$WORK/root"
    find_text "$WORK/root" >/dev/null || {
        echo "error: the package $PKG has no usr/share/libreoffice/help/<LANG>/text" >&2
        exit 1
    }
    rm -rf "$DEST"
    mv "$WORK/root" "$DEST"
    TEXT=$(find_text "$DEST")
fi
echo "$TEXT"
