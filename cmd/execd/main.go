// Command execd is a sandboxed code-execution MCP server. It wires the
// configuration, the logger, the sandbox engine, the workspace registry and
// the MCP front end together, and handles signals. It holds no logic of its
// own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
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
	os.Exit(run())
}

func run() int {
	var (
		configPath = flag.String("config", "", "TOML configuration file (default: built-in defaults)")
		listen     = flag.String("listen", "", "HTTP listen address, overrides server.listen")
		stdio      = flag.Bool("stdio", false, "serve MCP on stdin/stdout instead of HTTP")
		version    = flag.Bool("version", false, "print the version and exit")
		prepare    = flag.Bool("prepare", false, "compile the guests and make their base images into sandbox.cache_dir, then exit")
	)
	flag.Parse()
	if *version {
		fmt.Println("execd", frontend.ServerVersion)
		return 0
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "execd:", err)
		return 2
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
		if err := cfg.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "execd: -listen:", err)
			return 2
		}
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "execd:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()

	ctx := context.Background()
	engine, err := worker.NewEngine(ctx, worker.Config{
		CacheDir:          cfg.Sandbox.CacheDir,
		MemoryLimitMiB:    cfg.Limits.MaxMemoryMiB,
		TotalMemoryMiB:    cfg.Limits.MaxTotalMemoryMiB,
		MaxOutputBytes:    cfg.Limits.MaxOutputBytes,
		StrictTermination: cfg.Sandbox.StrictTermination,
		InterruptGrace:    cfg.Sandbox.InterruptGrace.Duration,
		PythonPreload:     cfg.Sandbox.PythonPreload,
	}, log.Named("worker"))
	if err != nil {
		log.Error("sandbox engine", zap.Error(err))
		return 1
	}
	defer func() { _ = engine.Close(context.Background()) }()
	if *prepare {
		return prepareGuests(engine, log)
	}

	mgr, err := workspace.NewManager(workspace.Config{
		DataDir:             cfg.Workspace.DataDir,
		HibernateAfter:      cfg.Workspace.HibernateAfter.Duration,
		IdleTTL:             cfg.Workspace.IdleTTL.Duration,
		MaxWorkspaces:       cfg.Workspace.MaxWorkspaces,
		MaxDiskMiB:          cfg.Workspace.MaxDiskMiB,
		MaxConcurrentRuns:   cfg.Limits.MaxConcurrentRuns,
		MaxRunsPerPrincipal: cfg.Limits.MaxRunsPerPrincipal,
		// Idle workspaces are hibernated before the engine's budget is full,
		// so that a guest's growth finds room.
		MemoryBudget: engine.MemoryBudget() / 10 * 9,
	}, engineFactory{engine}, log.Named("workspace"))
	if err != nil {
		log.Error("workspaces", zap.Error(err))
		return 1
	}
	defer func() {
		// Every live workspace is hibernated, within one more grace.
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownGrace.Duration)
		defer cancel()
		if err := mgr.Close(ctx); err != nil {
			log.Warn("stopped before every workspace was saved", zap.Error(err))
		}
	}()

	srv, err := frontend.New(frontend.Options{Config: cfg, Executor: mgr, Languages: engine.Languages(), Logger: log.Named("mcp")})
	if err != nil {
		log.Error("front end", zap.Error(err))
		return 1
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if *stdio {
		return serveStdio(srv, mgr, cfg, log, sigs)
	}
	return serveHTTP(srv, mgr, cfg, log, sigs)
}

func serveHTTP(srv *frontend.Server, mgr *workspace.Manager, cfg config.Config, log *zap.Logger, sigs <-chan os.Signal) int {
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		log.Error("listen", zap.Error(err))
		return 1
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.Duration,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	if cfg.Server.DebugListen != "" {
		if err := serveDebug(cfg.Server.DebugListen, log); err != nil {
			log.Error("debug listener", zap.Error(err))
			return 1
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("listening", zap.String("url", "http://"+ln.Addr().String()+cfg.Server.Path))
	_ = log.Sync()
	for {
		select {
		case err := <-errc:
			log.Error("serve", zap.Error(err))
			return 1
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				if err := srv.ReloadAuth(); err != nil {
					log.Error("reload auth tokens", zap.Error(err))
				} else {
					log.Info("auth tokens reloaded")
				}
				continue
			}
			log.Info("shutting down", zap.String("signal", sig.String()), zap.Duration("grace", cfg.Server.ShutdownGrace.Duration))
			mgr.Drain() // calls whose code has not started are answered now
			done := make(chan struct{})
			go func() {
				// Stop accepting; in-flight handlers finish below.
				_ = hs.Shutdown(context.Background())
				close(done)
			}()
			grace, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownGrace.Duration)
			srv.Shutdown(grace)
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = hs.Close()
			}
			if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("serve", zap.Error(err))
			}
			log.Info("stopped")
			return 0
		}
	}
}

func serveStdio(srv *frontend.Server, mgr *workspace.Manager, cfg config.Config, log *zap.Logger, sigs <-chan os.Signal) int {
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(context.Background(), os.Stdin, os.Stdout) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Error("stdio", zap.Error(err))
				return 1
			}
			return 0
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				continue
			}
			log.Info("shutting down", zap.String("signal", sig.String()))
			mgr.Drain()
			grace, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownGrace.Duration)
			srv.Shutdown(grace)
			cancel()
			return 0
		}
	}
}

// serveDebug serves net/http/pprof on its own listener (server.debug_listen).
func serveDebug(addr string, log *zap.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("debug listener", zap.String("url", "http://"+ln.Addr().String()+"/debug/pprof/"))
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

// prepareGuests waits for every guest to be compiled and its base image
// made (worker.Engine compiles in the background), so that the caches are
// warm for the next start.
func prepareGuests(engine *worker.Engine, log *zap.Logger) int {
	for _, lang := range engine.Languages() {
		if err := engine.Wait(context.Background(), lang); err != nil {
			log.Error("prepare", zap.String("language", lang), zap.Error(err))
			return 1
		}
	}
	return 0
}

func newLogger(c config.Log) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.Format == "json" {
		enc = zapcore.NewJSONEncoder(encCfg)
	} else {
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	}
	// One line per call would cost a write(2) per call: lines are buffered
	// and leave within logFlushEvery, at once for warnings and errors, and
	// on Sync (start-up, shutdown).
	ws := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(os.Stderr), Size: 256 << 10, FlushInterval: logFlushEvery}
	core := zapcore.NewCore(enc, ws, lvl)
	return zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Level >= zapcore.WarnLevel {
			return ws.Sync()
		}
		return nil
	})), nil
}

const logFlushEvery = 200 * time.Millisecond
