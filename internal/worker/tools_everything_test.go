package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/upstream"
	"execd/internal/upstream/upstreamtest"
)

// The reference server @modelcontextprotocol/server-everything as a real
// upstream of both guests, over stdio and over streamable HTTP, located
// and started by upstreamtest (test/e2e/setup.sh installs it and Node 22).

// progressCount counts the run's progress reports.
type progressCount struct {
	mu  sync.Mutex
	msg []string
}

func (p *progressCount) Progress(_, _ float64, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msg = append(p.msg, msg)
}

func TestToolsWithServerEverything(t *testing.T) {
	node, index := upstreamtest.Everything(t)
	codes := map[string]string{
		"javascript": `const e = await tools.everything.echo({message: "hello"});
			const s = await tools.everything.get_sum({a: 2, b: 40});
			const im = await tools.everything["get-tiny-image"]();
			show(im.images[0]);
			const w = await tools.everything.get_structured_content({location: "Chicago"});
			const lr = await tools.everything.trigger_long_running_operation({duration: 0.3, steps: 3});
			[String(e).includes("hello"), String(s).includes("42"), im.images.length, typeof w.temperature, String(lr).includes("ompleted")]`,
		"python": "from execd import tools, show\n" +
			"e = tools.everything.echo(message='hello')\n" +
			"s = tools.everything.get_sum(a=2, b=40)\n" +
			"im = tools.everything.get_tiny_image()\n" +
			"show(im['images'][0])\n" +
			"w = tools.everything.get_structured_content(location='Chicago')\n" +
			"lr = tools.everything.trigger_long_running_operation(duration=0.3, steps=3)\n" +
			"['hello' in str(e), '42' in str(s), len(im['images']), 'number' if isinstance(w['temperature'], (int, float)) else '?', 'ompleted' in str(lr)]",
	}
	want := map[string]string{"javascript": `[true, true, 1, "number", true]`, "python": `[True, True, 1, 'number', True]`}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			u := config.Upstream{Name: "everything", Allow: []string{"*"}, MaxCallsPerRun: 100,
				CallTimeout: config.Duration{Duration: 30 * time.Second}, ConnectTimeout: config.Duration{Duration: 30 * time.Second}}
			if transport == "stdio" {
				u.Command = []string{node, index, "stdio"}
			} else {
				u.URL = upstreamtest.EverythingHTTP(t, node, index) + "/mcp"
			}
			h, err := upstream.New([]config.Upstream{u}, config.CodeMode{}, upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			for _, lang := range []string{"javascript", "python"} {
				t.Run(lang, func(t *testing.T) {
					w := newLangWorker(t, lang)
					sink := &progressCount{}
					r := w.Run(context.Background(), codes[lang], RunOptions{Tools: h.NewRun("local", nil), Sink: sink, Timeout: 60 * time.Second})
					if r.Status != StatusOK || value(r) != want[lang] {
						t.Fatalf("= %s\nstderr: %s", describe(r), r.Stderr)
					}
					if len(r.Images) != 1 || r.Images[0].MIME != "image/png" {
						t.Errorf("shown: %d images", len(r.Images))
					}
					sink.mu.Lock()
					if len(sink.msg) == 0 {
						t.Error("no progress of the long-running operation reached the run")
					}
					sink.mu.Unlock()
					if len(r.ToolCalls) != 5 {
						t.Errorf("ToolCalls = %v", r.ToolCalls)
					}
				})
			}
		})
	}
}
