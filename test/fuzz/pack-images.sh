#!/bin/bash
# Packs image files of a dump into one input of the fuzz targets (format in fuzz.h):
#   pack-images.sh DIR PATTERN... > OUT
# A pattern starting with '@' packs its files by size only (NAME@SIZE): page images.
set -euo pipefail
dir=$1
shift
cd "$dir"
shopt -s nullglob
for pattern in "$@"; do
	for f in ${pattern#@}; do
		[ -e "$f" ] || continue # a plain name the dump does not have
		if [ "${pattern:0:1}" = @ ]; then
			printf '\0CRFUZZ\0%s@%d\0' "$f" "$(stat -c %s "$f")"
		else
			printf '\0CRFUZZ\0%s\0' "$f"
			head -c 8192 "$f"
		fi
	done
done
