package worker

import (
	"context"
	"sort"
	"testing"
	"time"
)

func TestZZFirstCallWall(t *testing.T) {
	made := testEngine(t, true)
	spare := spareEngine(t, 1)
	for _, lang := range made.Languages() {
		for _, tc := range []struct {
			name string
			e    *Engine
		}{{"made", made}, {"spare", spare}, {"made", made}, {"spare", spare}} {
			var nw, fc []time.Duration
			for i := 0; i < 40; i++ {
				if tc.e == spare {
					waitSpares(t, spare, lang, 1)
				}
				time.Sleep(2 * time.Millisecond)
				t0 := time.Now()
				w, _ := tc.e.NewWorker(context.Background(), lang, WorkerOptions{})
				nw = append(nw, time.Since(t0))
				time.Sleep(15 * time.Millisecond)
				t1 := time.Now()
				w.Run(context.Background(), firstCell[lang], RunOptions{})
				fc = append(fc, time.Since(t1))
				w.Close()
			}
			sort.Slice(nw, func(i, j int) bool { return nw[i] < nw[j] })
			sort.Slice(fc, func(i, j int) bool { return fc[i] < fc[j] })
			t.Logf("%s %s: NewWorker p50 %v, first call p50 %v", lang, tc.name, nw[20], fc[20])
		}
	}
}
