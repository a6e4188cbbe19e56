package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// summary is one run's outcome; -out writes it as one JSON line.
type summary struct {
	Label         string `json:"label,omitempty"`
	Server        string `json:"server,omitempty"`
	Round         int    `json:"round,omitempty"`
	Scenario      string `json:"scenario"`
	Era           string `json:"era"`
	Clients       int    `json:"clients"`
	Tool          string `json:"tool"`
	WorkspaceMode string `json:"workspaceMode"`

	N       int     `json:"n"`
	Seconds float64 `json:"seconds,omitempty"`
	RPS     float64 `json:"rps,omitempty"`
	P50Ms   float64 `json:"p50Ms"`
	P90Ms   float64 `json:"p90Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	MeanMs  float64 `json:"meanMs"`

	ErrorCount int            `json:"errorCount"`
	Errors     map[string]int `json:"errors,omitempty"`
	Frames     int            `json:"frames,omitempty"`
	SSE        int            `json:"sse,omitempty"`
	RSSKiB     int64          `json:"rssKiB,omitempty"`

	// load scenario, with -pid: the server's CPU time per measured call,
	// its own and this tool's share of the machine, and the share the
	// hypervisor took (steal), which slows a run without any of its code
	// changing.
	ServerCPUUsPerCall float64 `json:"serverCpuUsPerCall,omitempty"`
	LoadCPUUsPerCall   float64 `json:"loadCpuUsPerCall,omitempty"`
	StealPct           float64 `json:"stealPct,omitempty"`

	// cancel scenario
	Resets           int     `json:"resets,omitempty"`
	BaselineP50Ms    float64 `json:"baselineP50Ms,omitempty"`
	BaselineP99Ms    float64 `json:"baselineP99Ms,omitempty"`
	Background       int     `json:"background,omitempty"`
	BackgroundRPS    float64 `json:"backgroundRps,omitempty"`
	BackgroundErrors int     `json:"backgroundErrors,omitempty"`

	// idle scenario
	RSSSteps           map[string]int64 `json:"rssSteps,omitempty"`
	RSSPerWorkspaceKiB float64          `json:"rssPerWorkspaceKiB,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the nearest-rank percentile of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func (s *summary) setLatency(lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var total time.Duration
	for _, d := range lat {
		total += d
	}
	s.P50Ms, s.P90Ms, s.P99Ms = ms(pct(lat, 50)), ms(pct(lat, 90)), ms(pct(lat, 99))
	s.MaxMs = ms(lat[len(lat)-1])
	s.MeanMs = ms(total / time.Duration(len(lat)))
}

func (s *summary) fill(r loadResult) {
	s.N = len(r.lat)
	s.Seconds = r.elapsed.Seconds()
	if r.elapsed > 0 {
		s.RPS = float64(len(r.lat)) / r.elapsed.Seconds()
	}
	s.setLatency(r.lat)
	s.Errors = r.errs
	s.ErrorCount = sum(r.errs)
	s.Frames = r.frames
	s.SSE = r.sse
}

func (s summary) print(w io.Writer) {
	head := fmt.Sprintf("%s %s era, %d client(s)", s.Scenario, s.Era, s.Clients)
	if s.Label != "" {
		head = s.Label + ": " + head
	}
	fmt.Fprintln(w, head)
	switch s.Scenario {
	case "idle":
		keys := make([]string, 0, len(s.RSSSteps))
		for k := range s.RSSSteps {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { a, _ := strconv.Atoi(keys[i]); b, _ := strconv.Atoi(keys[j]); return a < b })
		for _, k := range keys {
			fmt.Fprintf(w, "  %5s workspaces: VmRSS %8.1f MiB\n", k, float64(s.RSSSteps[k])/1024)
		}
		fmt.Fprintf(w, "  per workspace (last step): %.0f KiB\n", s.RSSPerWorkspaceKiB)
	case "cancel":
		fmt.Fprintf(w, "  cancels %d  cancel->free p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", s.N, s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs)
		fmt.Fprintf(w, "  a plain call on the same workspace: p50 %.2f ms  p99 %.2f ms;  resets %d\n", s.BaselineP50Ms, s.BaselineP99Ms, s.Resets)
		if s.Background > 0 {
			fmt.Fprintf(w, "  background: %d clients, %.0f req/s, %d errors\n", s.Background, s.BackgroundRPS, s.BackgroundErrors)
		}
	default:
		fmt.Fprintf(w, "  %d calls in %.2fs: %.1f req/s  (sse answers %d, notifications %d)\n", s.N, s.Seconds, s.RPS, s.SSE, s.Frames)
		fmt.Fprintf(w, "  latency p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  mean %.2f ms\n", s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs, s.MeanMs)
	}
	fmt.Fprintf(w, "  errors %d", s.ErrorCount)
	for k, v := range s.Errors {
		fmt.Fprintf(w, "  [%s: %d]", k, v)
	}
	fmt.Fprintln(w)
	if s.ServerCPUUsPerCall > 0 {
		fmt.Fprintf(w, "  CPU per call: server %.0f µs, load tool %.0f µs;  steal %.1f %% of the machine\n", s.ServerCPUUsPerCall, s.LoadCPUUsPerCall, s.StealPct)
	}
	if s.RSSKiB > 0 && s.Scenario != "idle" {
		fmt.Fprintf(w, "  server VmRSS %.1f MiB\n", float64(s.RSSKiB)/1024)
	}
}

// printReport reads -out lines and prints markdown tables of the medians
// over rounds, execd beside the peer.
func printReport(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var all []summary
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s summary
		if json.Unmarshal(sc.Bytes(), &s) == nil {
			all = append(all, s)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	type key struct{ label, server string }
	groups := map[key][]summary{}
	var labels []string
	seen := map[string]bool{}
	for _, s := range all {
		k := key{s.Label, s.Server}
		groups[k] = append(groups[k], s)
		if !seen[s.Label] {
			seen[s.Label] = true
			labels = append(labels, s.Label)
		}
	}
	med := func(ss []summary, f func(summary) float64) float64 {
		if len(ss) == 0 {
			return 0
		}
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	errs := func(ss []summary) int {
		n := 0
		for _, s := range ss {
			n += s.ErrorCount + s.BackgroundErrors
		}
		return n
	}
	lats := func(ss []summary) string {
		if len(ss) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f / %.2f / %.2f / %.1f",
			med(ss, func(s summary) float64 { return s.P50Ms }), med(ss, func(s summary) float64 { return s.P90Ms }),
			med(ss, func(s summary) float64 { return s.P99Ms }), med(ss, func(s summary) float64 { return s.MaxMs }))
	}
	rps := func(ss []summary) string {
		if len(ss) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f", med(ss, func(s summary) float64 { return s.RPS }))
	}

	// CPU per call and steal are medians over the runs that measured them.
	measured := func(ss []summary) []summary {
		var m []summary
		for _, s := range ss {
			if s.ServerCPUUsPerCall > 0 {
				m = append(m, s)
			}
		}
		return m
	}
	usPerCall := func(ss []summary, f func(summary) float64) string {
		if ss = measured(ss); len(ss) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f", med(ss, f))
	}
	cpu := func(e, p []summary) string {
		server := func(s summary) float64 { return s.ServerCPUUsPerCall }
		self := func(s summary) float64 { return s.LoadCPUUsPerCall }
		out := usPerCall(e, server) + " / " + usPerCall(p, server) + "; " + usPerCall(e, self) + " / " + usPerCall(p, self)
		// The throughput ratio a machine that gave both runs the same
		// CPU would show: the peer's CPU per call over execd's, the load
		// tool's included (it shares the machine).
		both := func(s summary) float64 { return s.ServerCPUUsPerCall + s.LoadCPUUsPerCall }
		if me, mp := measured(e), measured(p); len(me) > 0 && len(mp) > 0 {
			out += fmt.Sprintf(" (%.2f×)", med(mp, both)/med(me, both))
		}
		return out
	}
	steal := func(ss []summary) string {
		if ss = measured(ss); len(ss) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f %% (max %.1f %%)", med(ss, func(s summary) float64 { return s.StealPct }), slices.MaxFunc(ss, func(a, b summary) int { return cmp.Compare(a.StealPct, b.StealPct) }).StealPct)
	}

	var load, cancel, idle []string
	for _, l := range labels {
		switch {
		case len(groups[key{l, "execd"}]) > 0 && groups[key{l, "execd"}][0].Scenario == "cancel":
			cancel = append(cancel, l)
		case len(groups[key{l, "execd"}]) > 0 && groups[key{l, "execd"}][0].Scenario == "idle":
			idle = append(idle, l)
		default:
			load = append(load, l)
		}
	}
	if len(load) > 0 {
		fmt.Fprintln(w, "| scenario | rounds | execd req/s | peer req/s | execd/peer | execd p50/p90/p99/max ms | peer p50/p90/p99/max ms | CPU µs per call: server execd/peer; load tool execd/peer (CPU ratio) | steal | errors execd/peer |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, l := range load {
			e, p := groups[key{l, "execd"}], groups[key{l, "peer"}]
			ratio := "–"
			if len(e) > 0 && len(p) > 0 {
				er, pr := med(e, func(s summary) float64 { return s.RPS }), med(p, func(s summary) float64 { return s.RPS })
				if pr > 0 {
					ratio = fmt.Sprintf("%.2f×", er/pr) + roundRatios(e, p)
				}
			}
			perr := "–"
			if len(p) > 0 {
				perr = strconv.Itoa(errs(p))
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d/%s |\n", l, max(len(e), len(p)), rps(e), rps(p), ratio, lats(e), lats(p),
				cpu(e, p), steal(append(append([]summary(nil), e...), p...)), errs(e), perr)
		}
		fmt.Fprintln(w)
	}
	if len(cancel) > 0 {
		fmt.Fprintln(w, "| cancellation | rounds | cancels | cancel→free p50 / p90 / p99 / max ms | plain call p50 / p99 ms | background req/s | resets | errors |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, l := range cancel {
			e := groups[key{l, "execd"}]
			n, resets := 0, 0
			for _, s := range e {
				n += s.N
				resets += s.Resets
			}
			bg := "–"
			if e[0].Background > 0 {
				bg = fmt.Sprintf("%.0f (%d clients)", med(e, func(s summary) float64 { return s.BackgroundRPS }), e[0].Background)
			}
			fmt.Fprintf(w, "| %s | %d | %d | %s | %.2f / %.2f | %s | %d | %d |\n", l, len(e), n, lats(e),
				med(e, func(s summary) float64 { return s.BaselineP50Ms }), med(e, func(s summary) float64 { return s.BaselineP99Ms }),
				bg, resets, errs(e))
		}
		fmt.Fprintln(w)
	}
	if len(idle) > 0 {
		for _, l := range idle {
			e := groups[key{l, "execd"}]
			var steps []string
			for k := range e[0].RSSSteps {
				steps = append(steps, k)
			}
			sort.Slice(steps, func(i, j int) bool { a, _ := strconv.Atoi(steps[i]); b, _ := strconv.Atoi(steps[j]); return a < b })
			fmt.Fprintf(w, "| %s: idle workspaces | %s | per workspace (last step) | errors |\n", l, strings.Join(steps, " | "))
			fmt.Fprintf(w, "| --- |%s --- | --- |\n", strings.Repeat(" --- |", len(steps)))
			for _, s := range e {
				var cells []string
				for _, k := range steps {
					cells = append(cells, fmt.Sprintf("%.1f MiB", float64(s.RSSSteps[k])/1024))
				}
				fmt.Fprintf(w, "| VmRSS (round %d) | %s | %.2f MiB | %d |\n", s.Round, strings.Join(cells, " | "), s.RSSPerWorkspaceKiB/1024, s.ErrorCount)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// roundRatios is the spread of execd's req/s over the peer's within each
// round both ran in, " (rounds 0.84–1.05)": the two ran minutes apart at
// most, so a round's ratio is free of what the machine did between rounds,
// which moves the ratio of the medians. "" with fewer than two rounds.
func roundRatios(e, p []summary) string {
	peer := map[int]float64{}
	for _, s := range p {
		peer[s.Round] = s.RPS
	}
	var r []float64
	for _, s := range e {
		if pr, ok := peer[s.Round]; ok && pr > 0 {
			r = append(r, s.RPS/pr)
		}
	}
	if len(r) < 2 {
		return ""
	}
	return fmt.Sprintf(" (rounds %.2f–%.2f)", slices.Min(r), slices.Max(r))
}
