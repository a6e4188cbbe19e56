#!/usr/bin/env bash
# test/stages.sh — run make targets as `make test` does, and print each one's wall time and
# CPU time at the end (also when one fails: the stages after it did not run).
#
#   bash test/stages.sh guests lint 'unit,fuzz|deploy,e2e,bench,soak'     # as `make test`
#
# Each argument is a step, run after the one before. A step is a stage (a make target), or
# lanes separated by "|" that run at the same time, each lane its stages separated by ","
# one after another. A stage of a parallel step prefixes its output lines with "[stage] ".
# The first stage that fails ends the run: the other lanes of its step are stopped, no
# later step starts, and the run exits with that stage's status after the table.
# Under the table, the lines of the failed stage's output that say what failed (go test's
# "--- FAIL" lines with their first messages, a panic, a data race, a failed package, or else
# the stage's last lines), so that a reader of the run's last lines learns which test it was.
#
# MAKE names the make to run (the Makefile passes its own). The table is the one
# BENCHMARKS.md's "Test suite stage times" keeps: one row per stage (its wall time, and its
# CPU time, user + system, of all its processes), one row per parallel step (its wall time:
# the longest lane's), and the whole run.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}

now() { echo "${EPOCHREALTIME/./}"; } # microseconds (bash 5)
minsec() { local s=$(($1 / 1000000)); printf '%d min %02d s' $((s / 60)) $((s % 60)); }
# cpu: sets CPU to the user + system time of the waited-for children of this shell, in
# microseconds. (`times` must run in this shell: in a pipe or $(...) its fork counts nothing.)
cpu() {
	local f=$tmp/times.$BASHPID
	times >"$f"
	CPU=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] }
		printf "%d\n", t * 1000000 }' "$f")
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stages.XXXXXX")
lanes_pids=()
stop_lanes() {
	local p
	for p in "${lanes_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
}
trap 'stop_lanes; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# run_stage STAGE PREFIX: runs one make target (output prefixed with PREFIX when set) and
# writes "<rc> <wall µs> <cpu µs>" to $tmp/STAGE.
run_stage() {
	local stage=$1 prefix=$2 t0 c0 rc
	cpu
	t0=$(now) c0=$CPU
	echo "$t0" >"$tmp/$stage.start"
	if [ -n "$prefix" ]; then
		echo "[$stage] === stage $stage"
		"$make" --no-print-directory "$stage" 2>&1 | tee "$tmp/$stage.log" | sed -u "s/^/[$stage] /"
		rc=${PIPESTATUS[0]}
	else
		"$make" --no-print-directory "$stage" 2>&1 | tee "$tmp/$stage.log"
		rc=${PIPESTATUS[0]}
	fi
	cpu
	echo "$rc $(($(now) - t0)) $((CPU - c0))" >"$tmp/$stage"
	return "$rc"
}

# run_lane STAGES PREFIX: the stages of one lane (comma-separated), in order, until one fails.
run_lane() {
	local st
	IFS=, read -ra st <<<"$1"
	for s in "${st[@]}"; do
		run_stage "$s" "$2" || return
	done
}

# what_failed STAGE: at most 14 lines of the stage's output that say what failed, each cut
# to 160 characters.
what_failed() {
	local log=$tmp/$1.log lines
	[ -f "$log" ] || return 0
	lines=$(awk '
		# go test: a failed test and the first two lines of its messages (indented deeper).
		/^ *--- FAIL: / { print; match($0, /^ */); ind = RLENGTH; keep = 2; next }
		keep > 0 { match($0, /^ */); if (RLENGTH > ind && $0 !~ /^ *--- /) { print; keep--; next } keep = 0 }
		/^FAIL\t/ || /^panic: / || /^WARNING: DATA RACE/ || /^fatal error: / || /test timed out after/ { print }
	' "$log")
	if [ -z "$lines" ]; then # not go test: the last lines before make's own
		lines=$(grep -v -E '^make(\[[0-9]+\])?: ' "$log" | tail -n 8)
	fi
	local n
	n=$(printf '%s\n' "$lines" | wc -l)
	printf '%s\n' "$lines" | head -n 14 | cut -c1-160 | sed 's/^/  /'
	[ "$n" -le 14 ] || echo "  ($((n - 14)) more such lines in the stage's output above)"
}

rows=() # "name|wall µs|cpu µs or -|result"
rc=0
start=$(now)
for step in "$@"; do
	if [[ $step != *"|"* && $step != *,* ]]; then
		echo "=== stage $step"
		run_stage "$step" ""
		read -r rc wall cpuus <"$tmp/$step"
		rows+=("$step|$wall|$cpuus|$([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")
		[ "$rc" -eq 0 ] || break
		continue
	fi
	IFS='|' read -ra lanes <<<"$step"
	echo "=== stages at the same time: ${lanes[*]}"
	g0=$(now)
	lanes_pids=()
	declare -A running=()
	set -m # each lane in a process group of its own, so that a failure can stop the others
	for lane in "${lanes[@]}"; do
		run_lane "$lane" x </dev/null & # a background group must not read the terminal
		lanes_pids+=($!)
		running[$!]=1
	done
	set +m
	# The first lane to fail stops the others.
	failed=
	while [ ${#running[@]} -gt 0 ]; do
		done_pid=
		wait -n -p done_pid # the lanes are this shell's only children now
		lrc=$?
		[ -n "${done_pid:-}" ] || break
		unset "running[$done_pid]"
		if [ "$lrc" -ne 0 ]; then
			failed=$done_pid
			for p in "${!running[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
			wait
			break
		fi
	done
	lanes_pids=()
	gwall=$(($(now) - g0))
	first_fail=
	for lane in "${lanes[@]}"; do
		IFS=, read -ra st <<<"$lane"
		for s in "${st[@]}"; do
			if [ -f "$tmp/$s" ]; then
				read -r src wall cpuus <"$tmp/$s"
				if [ "$src" -eq 0 ]; then
					res=ok
				elif [ -n "$failed" ] && [ -z "$first_fail" ] && [ "$src" -ne 143 ] && [ "$src" -ne 130 ]; then
					res="FAILED (exit $src)" first_fail=$s rc=$src
				else
					res="stopped (exit $src)"
				fi
				rows+=("$s|$wall|$cpuus|$res")
			elif [ -f "$tmp/$s.start" ]; then
				rows+=("$s|$(($(now) - $(cat "$tmp/$s.start")))|-|stopped")
			else
				rows+=("$s|0|-|not run")
			fi
		done
	done
	if [ -n "$failed" ] && [ -z "$first_fail" ]; then rc=1; fi
	rows+=("(${step//|/ ‖ })|$gwall|-|$([ -z "$failed" ] && echo ok || echo failed)")
	[ -z "$failed" ] || break
done
total=$(($(now) - start))
echo
if [ "$rc" -ne 0 ]; then
	for r in "${rows[@]}"; do
		IFS='|' read -r n _ _ res <<<"$r"
		[[ $res == FAILED* ]] && echo "make test: stage $n failed (${res#FAILED (}; the steps after it did not run, and stages running beside it were stopped."
	done
	echo
fi
echo "| stage | wall time | CPU time | result |"
echo "| --- | --- | --- | --- |"
for r in "${rows[@]}"; do
	IFS='|' read -r n wall cpuus res <<<"$r"
	c=-
	[ "$cpuus" != - ] && c=$(minsec "$cpuus")
	printf '| %s | %s | %s | %s |\n' "$n" "$(minsec "$wall")" "$c" "$res"
done
cpu
printf '| all | %s | %s | %s |\n' "$(minsec "$total")" "$(minsec "$CPU")" "$([ "$rc" -eq 0 ] && echo ok || echo failed)"
if [ "$rc" -ne 0 ]; then
	for r in "${rows[@]}"; do
		IFS='|' read -r n _ _ res <<<"$r"
		if [[ $res == FAILED* ]]; then
			echo
			echo "what failed in stage $n:"
			what_failed "$n"
		fi
	done
fi
exit "$rc"
