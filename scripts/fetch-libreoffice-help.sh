#!/bin/sh
# Fetch Debian's Chinese LibreOffice help (libreoffice-help-zh-cn: ~2,561 real HTML pages with
# real relative links) into the topiccrawl cache, for the `htmltree:` corpus reader.
# Idempotent: does nothing when already extracted. Prints the path of the `text/` directory:
#   scrapy serveweb --corpus "htmltree:$(scripts/fetch-libreoffice-help.sh)?opaque=1&labeldepth=1"
# Needs apt-get and dpkg-deb (Debian/Ubuntu); never writes outside the cache directory.
set -eu

CACHE="${TOPICCRAWL_CACHE:-$HOME/.cache/topiccrawl}"
DEST="$CACHE/libreoffice-help-zh-cn"
TEXT="$DEST/usr/share/libreoffice/help/zh-CN/text"

if [ ! -d "$TEXT" ]; then
    mkdir -p "$CACHE"
    WORK=$(mktemp -d "$CACHE/.lo-help.XXXXXX")
    chmod 755 "$WORK"  # lets apt-get download as the _apt user
    trap 'rm -rf "$WORK"' EXIT
    cd "$WORK"
    if ! apt-get download libreoffice-help-zh-cn >&2; then
        echo "apt-get download failed; running apt-get update and retrying" >&2
        apt-get update >&2
        apt-get download libreoffice-help-zh-cn >&2
    fi
    dpkg-deb -x libreoffice-help-zh-cn_*.deb "$WORK/root"
    [ -d "$WORK/root/usr/share/libreoffice/help/zh-CN/text" ] || {
        echo "error: the package has no usr/share/libreoffice/help/zh-CN/text" >&2
        exit 1
    }
    rm -rf "$DEST"
    mv "$WORK/root" "$DEST"
fi
echo "$TEXT"
