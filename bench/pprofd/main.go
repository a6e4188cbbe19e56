// Command pprofd is execd with net/http/pprof on a second listener, for the
// profiles in BENCHMARKS.md. It wires the same packages the same way as
// cmd/execd (engine, workspace manager, front end, HTTP server) and nothing
// else: it exists so that the product binary carries no profiling endpoint.
// Keep its wiring in step with cmd/execd/main.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"execd/internal/config"
	"execd/internal/frontend"
	"execd/internal/worker"
	"execd/internal/workspace"
)

func main() {
	configPath := flag.String("config", "", "TOML configuration file")
	listen := flag.String("listen", "", "MCP listen address, overrides server.listen")
	pprofAddr := flag.String("pprof", "127.0.0.1:6060", "listen address of /debug/pprof")
	flag.Parse()
	if err := run(*configPath, *listen, *pprofAddr); err != nil {
		fmt.Fprintln(os.Stderr, "pprofd:", err)
		os.Exit(1)
	}
}

func run(configPath, listen, pprofAddr string) error {
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	if listen != "" {
		cfg.Server.Listen = listen
	}
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return fmt.Errorf("log.level: %w", err)
	}
	// The same encoder as cmd/execd, so that logging costs what it costs there.
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(encCfg), zapcore.Lock(os.Stderr), lvl))
	ctx := context.Background()
	engine, err := worker.NewEngine(ctx, worker.Config{
		CacheDir:          cfg.Sandbox.CacheDir,
		MemoryLimitMiB:    cfg.Limits.MaxMemoryMiB,
		MaxOutputBytes:    cfg.Limits.MaxOutputBytes,
		StrictTermination: cfg.Sandbox.StrictTermination,
		InterruptGrace:    cfg.Sandbox.InterruptGrace.Duration,
	}, log)
	if err != nil {
		return err
	}
	defer func() { _ = engine.Close(context.Background()) }()
	mgr, err := workspace.NewManager(workspace.Config{
		DataDir:           cfg.Workspace.DataDir,
		IdleTTL:           cfg.Workspace.IdleTTL.Duration,
		MaxWorkspaces:     cfg.Workspace.MaxWorkspaces,
		MaxDiskMiB:        cfg.Workspace.MaxDiskMiB,
		MaxConcurrentRuns: cfg.Limits.MaxConcurrentRuns,
	}, engineFactory{engine}, log)
	if err != nil {
		return err
	}
	defer func() { _ = mgr.Close(context.Background()) }()
	srv, err := frontend.New(frontend.Options{Config: cfg, Executor: mgr, Languages: engine.Languages(), Logger: log})
	if err != nil {
		return err
	}

	go func() { _ = http.ListenAndServe(pprofAddr, nil) }()
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.Duration, IdleTimeout: 2 * time.Minute}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		<-sigs
		grace, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(grace)
		_ = hs.Shutdown(grace)
	}()
	fmt.Fprintf(os.Stderr, "pprofd: MCP on http://%s%s, pprof on http://%s/debug/pprof/\n", ln.Addr(), cfg.Server.Path, pprofAddr)
	if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

// engineFactory lets the workspace registry make workers (as in cmd/execd).
type engineFactory struct{ e *worker.Engine }

func (f engineFactory) Languages() []string { return f.e.Languages() }

func (f engineFactory) NewRunner(ctx context.Context, lang, dir string) (workspace.Runner, error) {
	return f.e.NewWorker(ctx, lang, worker.WorkerOptions{Dir: dir})
}
