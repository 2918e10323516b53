#!/bin/sh
# Downloads a registry checkpoint's pinned revision from Hugging Face and
# converts it to a Kipp artifact.
#
# usage: tools/download.sh [--no-convert] ID [DIR]
#
#   ID    a registry id (tools/registry.tsv, the tooling mirror of the
#         compiled-in registry), e.g. qwen3-0.6b
#   DIR   where the checkpoint files go (default models/ID); the artifact is
#         written next to it as DIR.gguf
#
# Fetches {endpoint}/{repo}/resolve/{revision}/{file} for config.json,
# tokenizer.json, tokenizer_config.json, chat_template.jinja (newer revisions
# keep the template there; required when tokenizer_config.json has no
# chat_template and the entry is not a base one, else optional),
# generation_config.json (optional) and model.safetensors.index.json
# (optional); when the index exists, every shard its weight_map names, else
# model.safetensors. Then runs
#   kipp convert DIR -o DIR.gguf --checkpoint ID
#
# Environment:
#   HF_ENDPOINT  host to fetch from (default https://huggingface.co); a
#                mirror may also serve the synthetic-* entries, which have
#                no download on huggingface.co
#   HF_TOKEN     sent as "Authorization: Bearer ..." when set
#   KIPP         the kipp binary (default build/kipp next to this script)
#
# Behaviour: a file already complete in DIR is not fetched again, and when
# every required file is already there nothing is fetched at all (so a
# rerun works offline); optional files absent either way are reported in
# one line. Transfers
# go to FILE.part and resume from there (HTTP Range, curl -C -) when rerun
# after an interruption; a file is renamed into place only when complete.
# When the server states the file's SHA-256 (X-Linked-ETag, as huggingface.co
# does for weights), the finished file is checked against it; a mismatch
# deletes the file and fails. Any HTTP error other than 404 on an optional
# file fails with the URL and status; nothing is skipped silently.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REGISTRY=$ROOT/tools/registry.tsv
KIPP=${KIPP:-$ROOT/build/kipp}
ENDPOINT=${HF_ENDPOINT:-https://huggingface.co}
ENDPOINT=${ENDPOINT%/}

die() {
    echo "download.sh: $*" >&2
    exit 1
}

usage() {
    sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

CONVERT=1
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --no-convert) CONVERT=0; shift ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] && [ $# -le 2 ] || { usage >&2; exit 2; }
ID=$1
DIR=${2:-models/$ID}
DIR=${DIR%/}

command -v curl >/dev/null 2>&1 || die "curl is required"
[ -f "$REGISTRY" ] || die "registry mirror not found: $REGISTRY"

# ---- registry lookup ------------------------------------------------------
ROW=$(awk -F '\t' -v id="$ID" '!/^#/ && $1 == id { print $2 "\t" $3 "\t" $4; exit }' "$REGISTRY")
[ -n "$ROW" ] || die "'$ID' is not a registry checkpoint (see $REGISTRY for the ids)"
REPO=$(printf '%s' "$ROW" | cut -f1)
REVISION=$(printf '%s' "$ROW" | cut -f2)
VARIANT=$(printf '%s' "$ROW" | cut -f3)
case $REPO in
kipp-synthetic/*)
    if [ -z "${HF_ENDPOINT:-}" ]; then
        die "'$ID' is synthetic: it has no download on huggingface.co; make it with: $KIPP synth $ID $DIR"
    fi
    ;;
esac

mkdir -p "$DIR"
echo "download.sh: $ID = $REPO @ $REVISION from $ENDPOINT into $DIR"

# curl options shared by every request, in a private config file so the
# token never appears on a command line (curl does not forward it when a
# redirect changes host, e.g. to the hub's CDN).
CURLCFG=$(mktemp "${TMPDIR:-/tmp}/kipp-download.XXXXXX")
trap 'rm -f "$CURLCFG"' EXIT
trap 'exit 130' INT TERM
{
    echo location
    echo fail
    echo show-error
    echo 'connect-timeout = 30'
    echo 'retry = 2'
    if [ -t 2 ]; then echo progress-bar; else echo silent; fi
    if [ -n "${HF_TOKEN:-}" ]; then
        esc=$(printf '%s' "$HF_TOKEN" | sed 's/[\\"]/\\&/g')
        printf 'header = "Authorization: Bearer %s"\n' "$esc"
    fi
} >"$CURLCFG"

# Optional files that turned out absent, for the one-line report.
ABSENT=

# fetch FILE REQUIRED: 0 = fetched or already present; 1 = absent (404, only
# when not REQUIRED; added to ABSENT); exits on every other failure.
fetch() {
    file=$1
    required=$2
    target=$DIR/$file
    part=$target.part
    headers=$target.headers
    errlog=$target.err
    url=$ENDPOINT/$REPO/resolve/$REVISION/$file
    if [ -f "$target" ]; then
        echo "  $file: present"
        return 0
    fi
    attempt=0
    while :; do
        attempt=$((attempt + 1))
        if [ -s "$part" ]; then
            echo "  $file: resuming at byte $(wc -c <"$part" | tr -d ' ')"
        else
            echo "  $file"
        fi
        status=0
        if [ "$required" = 1 ]; then
            code=$(curl --config "$CURLCFG" --continue-at - --dump-header "$headers" \
                --output "$part" --write-out '%{http_code}' "$url") || status=$?
        else
            # An optional file's 404 is an answer, not an error: curl's own
            # "curl: (22) ... 404" line is kept back and shown only for
            # other failures.
            code=$(curl --config "$CURLCFG" --continue-at - --dump-header "$headers" \
                --output "$part" --write-out '%{http_code}' "$url" 2>"$errlog") || status=$?
        fi
        if [ $status -eq 0 ]; then
            rm -f "$errlog"
            break
        fi
        if [ "$code" = 404 ] && [ "$required" = 0 ]; then
            rm -f "$part" "$headers" "$errlog"
            ABSENT="$ABSENT${ABSENT:+, }$file"
            return 1
        fi
        if [ -s "$errlog" ]; then cat "$errlog" >&2; fi
        rm -f "$errlog"
        # 416: the partial file is not a prefix the server can continue
        # (already complete or longer than the file); 33: the server ignores
        # Range. Either way start this file over, once.
        if { [ "$code" = 416 ] || [ $status -eq 33 ]; } && [ $attempt -eq 1 ]; then
            echo "  $file: cannot resume (HTTP $code, curl $status); restarting it"
            rm -f "$part"
            continue
        fi
        rm -f "$headers"
        die "fetching $url failed (HTTP ${code:-none}, curl exit $status)$(
            [ -s "$part" ] && echo "; kept $(wc -c <"$part" | tr -d ' ') bytes in $part, rerun to resume")"
    done
    # The expected SHA-256, when the server states it (the last one listed:
    # redirect hops repeat it).
    sha=$(tr -d '\r' <"$headers" | awk 'tolower($1) == "x-linked-etag:" { v = $2 } END { print v }' | tr -d '"')
    rm -f "$headers"
    case $sha in
    [0-9a-f]*)
        if [ ${#sha} -eq 64 ]; then
            got=$(sha256sum "$part" | cut -d' ' -f1)
            if [ "$got" != "$sha" ]; then
                rm -f "$part"
                die "$file: SHA-256 mismatch (got $got, server says $sha); deleted it, rerun to fetch again"
            fi
            echo "  $file: SHA-256 verified"
        fi
        ;;
    esac
    mv "$part" "$target"
    return 0
}

# Prints the distinct shard file names of an index's weight_map, one a line.
shard_list() {
    if [ -x /usr/bin/python3 ]; then
        /usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1], encoding="utf-8")).get("weight_map")
if not isinstance(m, dict) or not m: sys.exit("no weight_map in " + sys.argv[1])
for f in sorted(set(m.values())): print(f)' "$1"
    elif command -v node >/dev/null 2>&1; then
        node -e '
const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).weight_map;
if (!m || typeof m !== "object" || !Object.keys(m).length) { console.error("no weight_map in " + process.argv[1]); process.exit(1); }
for (const f of [...new Set(Object.values(m))].sort()) console.log(f);' "$1"
    else
        die "reading the shard index needs /usr/bin/python3 or node"
    fi
}

# has_chat_template FILE: tokenizer_config.json FILE carries a chat_template
# (an unreadable file counts as not; the conversion then reports it)
has_chat_template() {
    if [ -x /usr/bin/python3 ]; then
        /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8")).get("chat_template")
sys.exit(0 if t else 1)' "$1" 2>/dev/null
    elif command -v node >/dev/null 2>&1; then
        node -e '
const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).chat_template;
process.exit(t ? 0 : 1);' "$1" 2>/dev/null
    else
        grep -q '"chat_template"' "$1"
    fi
}

# Non-base entries need a chat template: from tokenizer_config.json, or
# (newer revisions) from chat_template.jinja beside it.
template_required() {
    [ "$VARIANT" != base ] && [ -f "$DIR/tokenizer_config.json" ] &&
        ! has_chat_template "$DIR/tokenizer_config.json"
}

# required_present: every file the conversion needs is already in DIR
required_present() {
    for f in config.json tokenizer.json tokenizer_config.json; do
        [ -f "$DIR/$f" ] || return 1
    done
    if template_required && [ ! -f "$DIR/chat_template.jinja" ]; then return 1; fi
    if [ -f "$DIR/model.safetensors.index.json" ]; then
        shards=$(shard_list "$DIR/model.safetensors.index.json" 2>/dev/null) || return 1
        [ -n "$shards" ] || return 1
        for shard in $shards; do
            case $shard in */* | .*) return 1 ;; esac
            [ -f "$DIR/$shard" ] || return 1
        done
        return 0
    fi
    [ -f "$DIR/model.safetensors" ]
}

if required_present; then
    # Optional files are not worth a network round trip (or a failure when
    # offline) once the conversion has what it needs.
    echo "download.sh: every required file is already in $DIR; nothing fetched"
    for f in generation_config.json chat_template.jinja; do
        [ -f "$DIR/$f" ] || ABSENT="$ABSENT${ABSENT:+, }$f"
    done
    if [ -n "$ABSENT" ]; then
        echo "download.sh: optional files not in $DIR (not fetched): $ABSENT"
    fi
else
    fetch config.json 1
    fetch generation_config.json 0 || true
    fetch tokenizer.json 1
    fetch tokenizer_config.json 1
    if template_required; then
        fetch chat_template.jinja 1
    else
        fetch chat_template.jinja 0 || true
    fi
    # A complete single-file checkpoint from an earlier run needs no index lookup.
    if [ -f "$DIR/model.safetensors" ] && [ ! -f "$DIR/model.safetensors.index.json" ]; then
        fetch model.safetensors 1
    elif fetch model.safetensors.index.json 0; then
        shards=$(shard_list "$DIR/model.safetensors.index.json") || die "cannot read the shard list from $DIR/model.safetensors.index.json"
        [ -n "$shards" ] || die "empty shard list in $DIR/model.safetensors.index.json"
        for shard in $shards; do
            # a hostile index must not write outside DIR
            case $shard in
            */* | .* | *[!A-Za-z0-9._-]*) die "refusing shard name '$shard' from the index" ;;
            *.safetensors) ;;
            *) die "shard '$shard' in the index is not a .safetensors file" ;;
            esac
            fetch "$shard" 1
        done
    else
        fetch model.safetensors 1
    fi
    if [ -n "$ABSENT" ]; then
        echo "download.sh: optional files not in $REPO@$REVISION: $ABSENT"
    fi
fi
echo "download.sh: $ID files complete in $DIR"

if [ $CONVERT -eq 1 ]; then
    [ -x "$KIPP" ] || die "kipp binary not found at $KIPP (run make, or set KIPP)"
    echo "download.sh: $KIPP convert $DIR -o $DIR.gguf --checkpoint $ID"
    "$KIPP" convert "$DIR" -o "$DIR.gguf" --checkpoint "$ID" ||
        die "conversion failed (the downloaded files stay in $DIR)"
    echo "download.sh: wrote $DIR.gguf"
fi
