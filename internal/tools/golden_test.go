package tools

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the want sections of testdata/*.txtar from what execd answers")

// A golden transcript is a txtar-style file: a comment, then sections.
//
//	-- send --          an HTTP request: "METHOD PATH", header lines, a blank line, the body
//	-- want --          the answer: the status, the headers to check, a blank line, the body
//	-- stdin --         lines written to a stdio connection
//	-- stdout --        the lines it must answer with, in order
//
//	-- send async --    an HTTP request left running: execd is answering
//	                    it when it has sent a request of its own on the
//	                    stream (or ended); the next sections go on
//	-- await --         the answer of the request left running
//	-- want --          follows await as it follows send
//
//	-- poll --          an HTTP request sent again and again (at most 10 s)
//	                    until its answer no longer says "status":"working":
//	                    a task's tasks/get; its want follows
//
// $SESSION stands for the Mcp-Session-Id the last initialize minted, $STATE
// for the last requestState execd sealed, $TASK for the last taskId execd
// minted (random in every process), and $TIME for a task's timestamps.
type section struct {
	name string
	body string
}

func parseTxtar(b []byte) (comment string, secs []section) {
	lines := strings.SplitAfter(string(b), "\n")
	cur := -1
	var sb strings.Builder
	flush := func() {
		if cur < 0 {
			comment = sb.String()
		} else {
			secs[cur].body = sb.String()
		}
		sb.Reset()
	}
	for _, l := range lines {
		t := strings.TrimRight(l, "\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			flush()
			secs = append(secs, section{name: strings.TrimSpace(t[3 : len(t)-3])})
			cur = len(secs) - 1
			continue
		}
		sb.WriteString(l)
	}
	flush()
	return comment, secs
}

func formatTxtar(comment string, secs []section) []byte {
	var b bytes.Buffer
	b.WriteString(comment)
	for _, s := range secs {
		fmt.Fprintf(&b, "-- %s --\n", s.name)
		b.WriteString(s.body)
		if !strings.HasSuffix(s.body, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// splitMessage splits "first line\nheaders\n\nbody".
func splitMessage(s string) (first string, hdr http.Header, body string) {
	head, body, _ := strings.Cut(s, "\n\n")
	hl := strings.Split(head, "\n")
	first = strings.TrimSpace(hl[0])
	hdr = http.Header{}
	for _, l := range hl[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return first, hdr, strings.TrimRight(body, "\n")
}

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txtar")
	if len(files) == 0 {
		t.Fatal("no golden transcripts in testdata/")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			comment, secs := parseTxtar(raw)
			cfg := testOptions()
			s := newTestServer(cfg, &fakeExec{})
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			var stdin *io.PipeWriter
			var stdout chan string
			session := ""
			st := &stateSub{}
			changed := false
			var running []*asyncAnswer
			for i := 0; i < len(secs); i++ {
				sec := secs[i]
				switch sec.name {
				case "send async":
					running = append(running, startHTTP(t, ts.URL, st.fill(sec.body), session))
				case "send", "await", "poll":
					if i+1 >= len(secs) || secs[i+1].name != "want" {
						t.Fatalf("section %d: %s without want", i, sec.name)
					}
					var got httpAnswer
					switch sec.name {
					case "send":
						got = doHTTP(t, ts.URL, st.fill(sec.body), session)
					case "poll":
						got = pollHTTP(t, ts.URL, st.fill(sec.body), session)
					default:
						if len(running) == 0 {
							t.Fatalf("section %d: await without send async", i)
						}
						got = running[0].wait(t)
						running = running[1:]
					}
					if sid := got.hdr.Get("Mcp-Session-Id"); sid != "" {
						session = sid
					}
					got.body = st.hide(got.body)
					want := secs[i+1].body
					gotText := got.render(want, session)
					if *update {
						if gotText != strings.TrimRight(want, "\n") {
							secs[i+1].body = gotText + "\n"
							changed = true
						}
					} else if gotText != strings.TrimRight(want, "\n") {
						t.Errorf("exchange %d (%s):\n--- got ---\n%s\n--- want ---\n%s", i/2+1, firstLine(sec.body), gotText, strings.TrimRight(want, "\n"))
					}
					i++
				case "stdin":
					if stdin == nil {
						var r *io.PipeReader
						r, stdin = io.Pipe()
						or, ow := io.Pipe()
						stdout = make(chan string, 1000)
						go func() { _ = s.ServeStdio(context.Background(), r, ow); ow.Close() }()
						go func() {
							defer close(stdout)
							br := bufio.NewReader(or)
							for {
								l, err := br.ReadString('\n')
								if err != nil {
									return
								}
								stdout <- strings.TrimRight(l, "\n")
							}
						}()
						defer stdin.Close()
					}
					for _, l := range strings.Split(strings.TrimRight(sec.body, "\n"), "\n") {
						if _, err := io.WriteString(stdin, st.fill(l)+"\n"); err != nil {
							t.Fatal(err)
						}
					}
					if i+1 < len(secs) && secs[i+1].name == "stdout" {
						want := strings.TrimRight(secs[i+1].body, "\n")
						n := len(strings.Split(want, "\n"))
						if want == "" {
							n = 0
						}
						var got string
						if *update {
							got = readUntilQuiet(stdout)
						} else {
							got = readLines(t, stdout, n)
						}
						got = st.hide(got)
						if *update {
							if got != want {
								secs[i+1].body = got + "\n"
								changed = true
							}
						} else if got != want {
							t.Errorf("stdio exchange %d:\n--- got ---\n%s\n--- want ---\n%s", i, got, want)
						}
						i++
					}
				default:
					t.Fatalf("unknown section %q", sec.name)
				}
			}
			if *update && changed {
				if err := os.WriteFile(file, formatTxtar(comment, secs), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// stateSub hides what differs in every process: the requestState execd
// seals as $STATE and the taskId it mints as $TASK (the last of each is put
// back into what is sent), a task's timestamps as $TIME.
type stateSub struct {
	last, task string
	tasks      []string // every taskId seen
}

var (
	requestStateRE = regexp.MustCompile(`"requestState":"([^"]+)"`)
	taskIDRE       = regexp.MustCompile(`"taskId":"([0-9a-f]{32})"`)
	taskTimeRE     = regexp.MustCompile(`"(createdAt|lastUpdatedAt)":"[^"]+"`)
)

func (st *stateSub) hide(s string) string {
	s = requestStateRE.ReplaceAllStringFunc(s, func(m string) string {
		st.last = requestStateRE.FindStringSubmatch(m)[1]
		return `"requestState":"$STATE"`
	})
	for _, m := range taskIDRE.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(st.tasks, m[1]) {
			st.tasks = append(st.tasks, m[1])
			st.task = m[1] // the newest
		}
	}
	for _, id := range st.tasks {
		s = strings.ReplaceAll(s, id, "$TASK")
	}
	return taskTimeRE.ReplaceAllString(s, `"$1":"$$TIME"`)
}

func (st *stateSub) fill(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "$STATE", st.last), "$TASK", st.task)
}

// asyncAnswer is a request left running (send async).
type asyncAnswer struct {
	resp  *http.Response
	lines chan string // the body, line by line, closed at its end
}

// startHTTP sends a request and returns once execd has sent a request of
// its own on the answer's stream, or the answer ended.
func startHTTP(t *testing.T, base, spec, session string) *asyncAnswer {
	t.Helper()
	req := newRequest(t, base, spec, session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	a := &asyncAnswer{resp: resp, lines: make(chan string, 100)}
	seen := make(chan struct{})
	go func() {
		defer close(a.lines)
		br := bufio.NewReader(resp.Body)
		once := false
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				a.lines <- l
				if !once && strings.Contains(l, `"method":`) && strings.Contains(l, `"id":`) {
					once = true
					close(seen)
				}
			}
			if err != nil {
				if !once {
					close(seen)
				}
				return
			}
		}
	}()
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("send async: no server request within 10 s")
	}
	return a
}

// wait reads the rest of the answer.
func (a *asyncAnswer) wait(t *testing.T) httpAnswer {
	t.Helper()
	var b strings.Builder
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-a.lines:
			if !ok {
				a.resp.Body.Close()
				return httpAnswer{status: a.resp.StatusCode, hdr: a.resp.Header, body: b.String()}
			}
			b.WriteString(l)
		case <-timeout:
			t.Fatal("await: the answer did not end within 10 s")
		}
	}
}

func firstLine(s string) string {
	_, _, body := splitMessage(s)
	if len(body) > 80 {
		body = body[:80] + "…"
	}
	return body
}

func readLines(t *testing.T, lines <-chan string, n int) string {
	t.Helper()
	var out []string
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Errorf("stdio: connection closed after %d of %d lines", len(out), n)
				return strings.Join(out, "\n")
			}
			out = append(out, l)
		case <-timeout:
			t.Errorf("stdio: timed out waiting for %d lines", n)
			return strings.Join(out, "\n")
		}
	}
	return strings.Join(out, "\n")
}

// readUntilQuiet reads lines until none has come for half a second (used
// only to rewrite transcripts).
func readUntilQuiet(lines <-chan string) string {
	var out []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return strings.Join(out, "\n")
			}
			out = append(out, l)
		case <-time.After(500 * time.Millisecond):
			return strings.Join(out, "\n")
		}
	}
}

type httpAnswer struct {
	status int
	hdr    http.Header
	body   string
}

// render prints the answer in the want format: the status, the headers the
// want names (plus Content-Type), the body.
func (a httpAnswer) render(want, session string) string {
	_, wantHdr, _ := splitMessage("x\n" + want)
	names := map[string]bool{"Content-Type": true}
	for k := range wantHdr {
		names[http.CanonicalHeaderKey(k)] = true
	}
	if a.hdr.Get("Mcp-Session-Id") != "" {
		names["Mcp-Session-Id"] = true
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		if a.hdr.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(strconv.Itoa(a.status))
	for _, k := range keys {
		v := a.hdr.Get(k)
		if session != "" {
			v = strings.ReplaceAll(v, session, "$SESSION")
		}
		fmt.Fprintf(&b, "\n%s: %s", k, v)
	}
	body := a.body
	if session != "" {
		body = strings.ReplaceAll(body, session, "$SESSION")
	}
	b.WriteString("\n\n")
	b.WriteString(strings.TrimRight(body, "\n"))
	return strings.TrimRight(b.String(), "\n")
}

// pollHTTP sends spec until its answer no longer says the task is working.
func pollHTTP(t *testing.T, base, spec, session string) httpAnswer {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := doHTTP(t, base, spec, session)
		if !strings.Contains(a.body, `"status":"working"`) || time.Now().After(deadline) {
			return a
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func doHTTP(t *testing.T, base, spec, session string) httpAnswer {
	t.Helper()
	resp, err := http.DefaultClient.Do(newRequest(t, base, spec, session))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpAnswer{status: resp.StatusCode, hdr: resp.Header, body: string(b)}
}

func newRequest(t *testing.T, base, spec, session string) *http.Request {
	t.Helper()
	spec = strings.ReplaceAll(spec, "$SESSION", session)
	first, hdr, body := splitMessage(spec)
	method, path, _ := strings.Cut(first, " ")
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			if strings.EqualFold(k, "Host") {
				req.Host = v
				continue
			}
			req.Header.Add(k, v)
		}
	}
	return req
}
