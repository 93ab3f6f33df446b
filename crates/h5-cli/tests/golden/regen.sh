#!/bin/sh
# Regenerates the golden h5dump outputs listed in cases.txt. Run from the workspace root with
# libhdf5's h5dump (the committed files come from h5dump 1.10.8, Ubuntu's hdf5-tools).
set -e
dir=crates/h5-cli/tests/golden
grep -v '^#' "$dir/cases.txt" | while read -r file opt path; do
    base=$(basename "$file" .h5)
    if [ "$opt" = "-" ]; then
        out="$dir/$base.ddl"
        h5dump "$file" > "$out"
    else
        out="$dir/$base$(echo "$path" | tr / _).ddl"
        h5dump "$opt" "$path" "$file" > "$out"
    fi
    echo "$out"
done
