#!/usr/bin/env bash
# test/stages.sh — run make targets one after another, as `make test` does, and print each
# one's wall time at the end (also when one fails: the stages after it did not run).
#
#   bash test/stages.sh guests lint unit bench fuzz e2e soak deploy
#
# MAKE names the make to run (the Makefile passes its own). The table is the one
# BENCHMARKS.md's "Test suite stage times" keeps.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}

now() { echo "${EPOCHREALTIME/./}"; } # microseconds (bash 5)
minsec() { local s=$(($1 / 1000000)); printf '%d min %02d s' $((s / 60)) $((s % 60)); }

names=() took=() states=()
rc=0
start=$(now)
for stage in "$@"; do
	echo "=== stage $stage"
	t0=$(now)
	"$make" --no-print-directory "$stage"
	rc=$?
	names+=("$stage")
	took+=($(($(now) - t0)))
	if [ $rc -ne 0 ]; then
		states+=("FAILED (exit $rc)")
		break
	fi
	states+=("ok")
done
echo
echo "| stage | wall time | result |"
echo "| --- | --- | --- |"
for i in "${!names[@]}"; do
	printf '| %s | %s | %s |\n' "${names[$i]}" "$(minsec "${took[$i]}")" "${states[$i]}"
done
printf '| all | %s | %s |\n' "$(minsec $(($(now) - start)))" "$([ $rc -eq 0 ] && echo ok || echo failed)"
exit $rc
