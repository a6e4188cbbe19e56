#!/usr/bin/env bash
# Every fuzz target in the tree, each for a fixed number of executions (the seed corpora always
# run in `make unit`). Usage: bash test/fuzz.sh [package:Target ...]   (none: all of them)
#
# Counts rather than a duration: with -fuzztime <duration>, Go's fuzz coordinator can report its
# own deadline as a failure ("context deadline exceeded") when the timer fires on a loaded
# machine. Each count is one to three seconds' work on 2 cores; FUZZSCALE multiplies them all.
#
# The list must name every `func Fuzz…` in the tree's Go packages, and nothing else: a target
# added without a count, or one that moved to another package, fails the stage rather than
# going unfuzzed.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZSCALE=${FUZZSCALE:-1}

TARGETS=(
	./internal/jsonrpc:FuzzDecode:75000
	./internal/jsonscan:FuzzObject:50000
	./internal/frontend:FuzzHTTP:25000
	./internal/frontend:FuzzMeta:25000
	./internal/frontend:FuzzDecodeHeaderValue:25000
	./internal/frontend:FuzzArguments:25000
	./internal/frontend:FuzzDecodeArg:25000
	./internal/frontend:FuzzSessionVerify:25000
	./internal/tools:FuzzAppendJSONString:15000
	./internal/tools:FuzzFileURI:10000
	./internal/config:FuzzParse:10000
	./internal/worker:FuzzKillSwitch:25000
	./internal/worker:FuzzBoundedBuffer:25000
	./internal/worker:FuzzReadImage:25000
	./internal/worker:FuzzJSImportRewrite:750
	./internal/worker:FuzzEnvelope:15000
	./internal/worker:FuzzNetStart:3000
	./internal/worker:FuzzImageSize:7500
	./internal/egress:FuzzTarget:32500
	./internal/egress:FuzzPattern:37500
	./internal/egress:FuzzSubstitute:37500
	./internal/procstat:FuzzVmRSS:75000
	./internal/tasks:FuzzDecodeRecord:7500
	./internal/upstream:FuzzSignature:2500
	./internal/upstream:FuzzIDScanner:5000
	./internal/packages:FuzzSemverRange:2500
	./internal/packages:FuzzPackument:5000
	./internal/packages:FuzzIndexPage:5000
	./internal/packages:FuzzMetadata:5000
	./internal/packages:FuzzMarker:7500
	./internal/packages:FuzzRequirement:3750
	./internal/packages:FuzzUnpack:250
	./internal/packages:FuzzLock:125
	./internal/packages:FuzzEntryPath:30000
	./internal/packages:FuzzNPMSpec:15000
	./internal/packages:FuzzWheelName:30000
	./internal/workspace:FuzzReadBinding:7500
	./internal/workspace:FuzzCleanPath:15000
)

# What the tree holds, as package:Target, against what the list names.
found=$(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*(' bench cmd deploy internal sandbox test |
	sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#./\1:\2#' | sort -u)
listed=$(printf '%s\n' "${TARGETS[@]}" | sed -E 's/:[0-9]+$//' | sort -u)
if [ "$found" != "$listed" ]; then
	echo "test/fuzz.sh: its list and the tree's fuzz targets differ:"
	diff <(echo "$listed") <(echo "$found") | sed -n 's/^< /  listed, not in the tree: /p; s/^> /  in the tree, not listed: /p'
	exit 1
fi

want=("$@")
for w in "${want[@]}"; do
	grep -qxF "$w" <<<"$listed" || { echo "test/fuzz.sh: no target $w (package:Target, as listed)"; exit 1; }
done
for t in "${TARGETS[@]}"; do
	pkg=${t%%:*}; rest=${t#*:}; name=${rest%%:*}; n=$(( ${rest##*:} * FUZZSCALE ))
	if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qxF "$pkg:$name"; then
		continue
	fi
	echo "fuzz $pkg $name ($n executions)"
	out=$($GO test -run '^$' -fuzz "^$name\$" -fuzztime "${n}x" "$pkg" 2>&1) || { echo "$out"; exit 1; }
	if ! grep -q 'execs:' <<<"$out"; then
		echo "$out"; echo "fuzz $pkg $name: no executions reported"; exit 1
	fi
	grep -E 'execs:' <<<"$out" | tail -1
done
