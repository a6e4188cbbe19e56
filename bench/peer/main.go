// Command peer is the comparison server of execd's benchmarks: a minimal MCP
// server on github.com/mark3labs/mcp-go that serves both protocol eras on one
// streamable-HTTP endpoint and offers a do-nothing `echo` tool.
//
// It lives in its own module so that execd never depends on mcp-go. The echo
// tool takes the same argument shape as execd's execute_code (code, language,
// workspace with "x-mcp-header": "Workspace"), so that the load tool sends the
// same bytes and headers to both servers; it answers with the code as text
// and as structuredContent, like execd's result.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const echoSchema = `{
  "type": "object",
  "properties": {
    "code": {"type": "string"},
    "language": {"type": "string"},
    "workspace": {"type": "string", "x-mcp-header": "Workspace"}
  },
  "required": ["code"]
}`

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "HTTP listen address")
	path := flag.String("path", "/mcp", "MCP endpoint path")
	addrFile := flag.String("addr-file", "", "write the bound address to this file once listening")
	flag.Parse()

	s := server.NewMCPServer("execd-bench-peer", "0.1.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Returns its code argument.", json.RawMessage(echoSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			code := req.GetString("code", "")
			res := mcp.NewToolResultText(code)
			res.StructuredContent = map[string]any{"status": "ok", "result": code}
			return res, nil
		})

	h := server.NewStreamableHTTPServer(s, server.WithEndpointPath(*path))
	mux := http.NewServeMux()
	mux.Handle(*path, h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		<-sigs
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}()
	log.Printf("peer listening on http://%s%s", ln.Addr(), *path)
	if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
