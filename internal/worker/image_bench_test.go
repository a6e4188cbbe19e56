package worker

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"
)

// Figures of images and new workers: go test -run '^$' -bench
// 'NewWorkerFirstCall|Snapshot|Restore' -count 5 ./internal/worker/
// Each reports its p50 and p99 besides the mean (ns/op).

// timed runs f once per iteration and reports the percentiles of its
// durations.
func timed(b *testing.B, f func()) { timedAfter(b, nil, f) }

// timedAfter is timed with prep run before each f, outside the timings.
func timedAfter(b *testing.B, prep, f func()) {
	var ds []time.Duration
	for b.Loop() {
		if prep != nil {
			b.StopTimer()
			prep()
			b.StartTimer()
		}
		t := time.Now()
		f()
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	pct := func(p float64) float64 { return float64(ds[int(float64(len(ds)-1)*p)].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "ms-p50")
	b.ReportMetric(pct(0.99), "ms-p99")
}

// firstCell is what a new workspace's first call runs: for Python the
// imports the default preload covers.
var firstCell = map[string]string{
	"javascript": "1+1",
	"python": "import json, re, datetime, collections, decimal, statistics, csv, dataclasses, uuid, random, math, " +
		"itertools, functools, typing\n1+1",
}

// BenchmarkNewWorkerFirstCall: a new worker (a clone of the base image) and
// its first call's result, the worker's part of a new workspace's first
// call. Back to back, made on the spot; then after an idle moment (2 ms,
// untimed, as between a user's calls; a processor woken from idle is
// slower at first), made on the spot and taken from a spare made ahead
// (spare.go; the pool is full again before each, untimed).
func BenchmarkNewWorkerFirstCall(b *testing.B) {
	made := testEngine(b, true)
	spare := spareEngine(b, 1)
	for _, lang := range made.Languages() {
		first := func(e *Engine) func() {
			return func() {
				w, err := e.NewWorker(context.Background(), lang, WorkerOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if r := w.Run(context.Background(), firstCell[lang], RunOptions{}); r.Status != StatusOK {
					b.Fatal(describe(r))
				}
				w.Close()
			}
		}
		idle := func() { time.Sleep(2 * time.Millisecond) }
		b.Run(lang, func(b *testing.B) { timed(b, first(made)) })
		b.Run(lang+"/after-idle", func(b *testing.B) { timedAfter(b, idle, first(made)) })
		b.Run(lang+"/after-idle-spare", func(b *testing.B) {
			timedAfter(b, func() { waitSpares(b, spare, lang, 1); idle() }, first(spare))
		})
	}
}

// benchWorker is a worker of lang holding the state of stateCode.
func benchWorker(b *testing.B, e *Engine, lang string) *Worker {
	w, err := e.NewWorker(context.Background(), lang, WorkerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	if r := w.Run(context.Background(), stateCode[lang].set, RunOptions{}); r.Status != StatusOK {
		b.Fatal(describe(r))
	}
	return w
}

// BenchmarkSnapshot: Snapshot and WriteTo of a worker holding a little
// state (stateCode), as hibernation does it; bytes/image is the encoded
// size.
func BenchmarkSnapshot(b *testing.B) {
	e := testEngine(b, true)
	for _, lang := range e.Languages() {
		b.Run(lang, func(b *testing.B) {
			w := benchWorker(b, e, lang)
			var buf bytes.Buffer
			timed(b, func() {
				img, err := w.Snapshot(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				if _, err := img.WriteTo(&buf); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(float64(buf.Len()), "bytes/image")
		})
	}
}

// BenchmarkRestore: ReadImage and Restore of that image, as waking a
// hibernated workspace does it, up to a worker ready to run.
func BenchmarkRestore(b *testing.B) {
	e := testEngine(b, true)
	for _, lang := range e.Languages() {
		b.Run(lang, func(b *testing.B) {
			img, err := benchWorker(b, e, lang).Snapshot(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			var buf bytes.Buffer
			img.WriteTo(&buf)
			enc := buf.Bytes()
			timed(b, func() {
				img, err := ReadImage(bytes.NewReader(enc))
				if err != nil {
					b.Fatal(err)
				}
				w, err := e.Restore(context.Background(), img, WorkerOptions{}, false)
				if err != nil {
					b.Fatal(err)
				}
				w.Close()
			})
		})
	}
}
