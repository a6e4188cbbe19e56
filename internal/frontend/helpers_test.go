package frontend

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"execd/internal/jsonrpc"
	"execd/internal/mcptest"
)

// The engine's tests serve two tools of their own, so that they test the
// protocol and not execd's tools (internal/tools has those tests):
//
//	test_echo {text, workspace?}  answers {"text": text}; workspace is
//	                              mirrored into Mcp-Param-Workspace
//	test_block {}                 waits until its context ends

const modernMeta = mcptest.ModernMeta

type client = mcptest.Client

type echoArgs struct {
	Text      string  `json:"text" desc:"What to answer."`
	Workspace *string `json:"workspace,omitempty" header:"Workspace" desc:"Mirrored, and ignored."`
}

func testOptions() Options {
	return Options{
		Version:                "0.1.0",
		Listen:                 "127.0.0.1:0",
		MaxStreamsPerPrincipal: 64,
		ProgressHeartbeat:      30 * time.Second,
		SessionIdleTTL:         time.Hour,
	}
}

// newTestServer is an engine with the test tools.
func newTestServer(opts Options) *Server {
	s, err := New(opts)
	if err != nil {
		panic(err)
	}
	err = AddTool(s, Tool[echoArgs]{Name: "test_echo", Description: "Answers its text.",
		Run: func(_ context.Context, _ *Call, in echoArgs) (any, *jsonrpc.Error) {
			return StructuredResult(map[string]any{"text": in.Text}, false), nil
		}})
	if err == nil {
		err = AddTool(s, Tool[struct{}]{Name: "test_block", Description: "Waits until cancelled.",
			Run: func(ctx context.Context, _ *Call, _ struct{}) (any, *jsonrpc.Error) {
				<-ctx.Done()
				return nil, nil
			}})
	}
	if err != nil {
		panic(err)
	}
	return s
}

func newHTTP(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	s := newTestServer(opts)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, ts
}

// httptestServer serves s over HTTP for the test and returns its URL.
func httptestServer(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}
