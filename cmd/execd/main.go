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
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"execd/internal/admin"
	"execd/internal/cluster"
	"execd/internal/config"
	"execd/internal/egress"
	"execd/internal/frontend"
	"execd/internal/packages"
	"execd/internal/tasks"
	"execd/internal/telemetry"
	"execd/internal/tools"
	"execd/internal/upstream"
	"execd/internal/worker"
	"execd/internal/workspace"
)

// version is execd's version, set at build time
// (-ldflags "-X main.version=…").
var version = "0.1.0"

func main() {
	os.Exit(run())
}

func run() int {
	var (
		configPath = flag.String("config", "", "TOML configuration file (default: built-in defaults)")
		listen     = flag.String("listen", "", "HTTP listen address, overrides server.listen")
		stdio      = flag.Bool("stdio", false, "serve MCP on stdin/stdout instead of HTTP")
		showVer    = flag.Bool("version", false, "print the version and exit")
		prepare    = flag.Bool("prepare", false, "compile the guests and make their base images into sandbox.cache_dir, then exit")
	)
	flag.Parse()
	if *showVer {
		fmt.Println("execd", version)
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
	var obs observers
	if cfg.Server.AdminListen != "" {
		obs.errors = admin.NewRecentErrors(0)
	}
	log, err := newLogger(cfg.Log, obs.errors)
	if err != nil {
		fmt.Fprintln(os.Stderr, "execd:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	started := time.Now()

	ctx := context.Background()
	if obs.tracer, err = telemetry.FromEnv(ctx, version); err != nil {
		log.Error("tracing", zap.Error(err))
		return 2
	}
	if obs.tracer != nil {
		log.Info("tracing to OTLP/HTTP (OTEL_* environment)")
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := obs.tracer.Shutdown(ctx); err != nil {
				log.Warn("tracing: spans not sent", zap.Error(err))
			}
		}()
	}
	// The gauges read the engine, the registry and the front end, made below.
	var (
		engine    *worker.Engine
		mgr       *workspace.Manager
		srv       *frontend.Server
		view      *admin.WorkspaceView
		taskStore *tasks.Store
		hub       *upstream.Hub
	)
	var upstreams func() []upstream.Status
	if len(cfg.Upstreams) > 0 {
		upstreams = func() []upstream.Status { return hub.Status() }
	}
	if cfg.Server.AdminListen != "" {
		view = &admin.WorkspaceView{List: func() []workspace.Info { return mgr.ListAll() }}
		obs.metrics = admin.NewMetrics(admin.Sources{
			Version:     version,
			Health:      func() workspace.Health { return mgr.Health() },
			OpenStreams: func() int { return srv.OpenStreams() },
			GuestMemory: func() (int64, int64) { return engine.MemoryBytes(), engine.MemoryBudget() },
			Workspaces:  view.Count,
			Tasks:       func() map[tasks.Status]int { return taskStore.Counts() },
			EgressHosts: cfg.Network.MetricsHosts,
			Upstreams:   upstreams,
		})
	}
	net, err := egress.New(cfg.Network, egress.Options{Log: log.Named("egress"), Observer: obs.forEgress()})
	if err != nil {
		log.Error("network", zap.Error(err))
		return 2
	}
	defer net.Close()
	var upstreamsChanged atomic.Pointer[func()]
	if hub, err = newHub(ctx, cfg, obs, log.Named("upstream"), &upstreamsChanged); err != nil {
		log.Error("upstream", zap.Error(err))
		return 2
	}
	if hub != nil {
		defer hub.Close()
	}
	pkgs, err := packages.New(cfg.Packages, cfg.Sandbox.CacheDir, packages.Options{Log: log.Named("packages")})
	if err != nil {
		log.Error("packages", zap.Error(err))
		return 1
	}
	var workerObs worker.Observer
	if obs.metrics != nil {
		workerObs = obs.metrics
	}
	engine, err = worker.NewEngine(ctx, worker.Config{
		CacheDir:            cfg.Sandbox.CacheDir,
		MemoryLimitMiB:      cfg.Limits.MaxMemoryMiB,
		TotalMemoryMiB:      cfg.Limits.MaxTotalMemoryMiB,
		MaxOutputBytes:      cfg.Limits.MaxOutputBytes,
		MaxImageBytes:       cfg.Limits.MaxImageBytes,
		MaxImages:           cfg.Limits.MaxImages,
		MaxInputAnswerBytes: cfg.Limits.MaxInputAnswerBytes,
		StrictTermination:   cfg.Sandbox.StrictTermination,
		InterruptGrace:      cfg.Sandbox.InterruptGrace.Duration,
		PythonPreload:       cfg.Sandbox.PythonPreload,
		SpareInstances:      cfg.Sandbox.SpareInstances,
		PackagesDir:         pkgs.CacheDir(),
		Observer:            workerObs,
	}, log.Named("worker"))
	if err != nil {
		log.Error("sandbox engine", zap.Error(err))
		return 1
	}
	defer func() { _ = engine.Close(context.Background()) }()
	if *prepare {
		return prepareGuests(engine, log)
	}

	var newID func() string
	if peers := cfg.Cluster.Peers; len(peers) > 0 {
		ring, err := cluster.NewRing(peers)
		if err == nil {
			newID, err = ring.Minter(cfg.Cluster.Self)
		}
		if err != nil {
			log.Error("cluster", zap.Error(err))
			return 2
		}
	}
	// Task ids are minted like workspace ids, so that a balancer hashing
	// them finds this instance.
	taskStore, err = tasks.Open(tasks.Config{Dir: cfg.Workspace.DataDir, TTL: cfg.Protocol.TaskTTL.Duration,
		MaxPerPrincipal: cfg.Protocol.MaxTasksPerPrincipal, NewID: newID, Logger: log.Named("tasks")})
	if err != nil {
		log.Error("tasks", zap.Error(err))
		return 1
	}
	defer taskStore.Close()
	mgr, err = workspace.NewManager(workspace.Config{
		DataDir:        cfg.Workspace.DataDir,
		HibernateAfter: cfg.Workspace.HibernateAfter.Duration,
		IdleTTL:        cfg.Workspace.IdleTTL.Duration,
		MaxWorkspaces:  cfg.Workspace.MaxWorkspaces,
		MaxDiskMiB:     cfg.Workspace.MaxDiskMiB,
		// Per instance: with cluster.shared_storage each instance counts
		// what it sees of a principal's directory.
		MaxPrincipalDiskMiB:       principalDisk(cfg),
		MaxWorkspacesPerPrincipal: principalWorkspaces(cfg),
		MaxConcurrentRuns:         cfg.Limits.MaxConcurrentRuns,
		MaxRunsPerPrincipal:       cfg.Limits.MaxRunsPerPrincipal,
		// Idle workspaces are hibernated before the engine's budget is full,
		// so that a guest's growth finds room.
		MemoryBudget:          engine.MemoryBudget() / 10 * 9,
		MaxMemoryPerPrincipal: principalShare(cfg, engine.MemoryBudget()),
		Observer:              obs.forWorkspaces(),
		NewID:                 newID,
		Network:               func(principal, ws string) worker.Network { return net.Session(principal, ws) },
		Packages:              pkgs,
	}, workspace.EngineFactory(engine), log.Named("workspace"))
	if err != nil {
		log.Error("workspaces", zap.Error(err))
		return 1
	}
	// A running guest's growth that the budget cannot hold first makes room
	// by hibernating idle workspaces.
	engine.SetReclaim(mgr.Reclaim)
	defer engine.SetReclaim(nil)
	defer func() {
		// Every live workspace is hibernated, within one more grace.
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownGrace.Duration)
		defer cancel()
		if err := mgr.Close(ctx); err != nil {
			log.Warn("stopped before every workspace was saved", zap.Error(err))
		}
	}()

	var exec workspace.Executor = mgr
	if cfg.Cluster.SharedStorage {
		if exec, err = cluster.NewShared(mgr, filepath.Join(cfg.Workspace.DataDir, "~locks"), log.Named("cluster")); err != nil {
			log.Error("cluster", zap.Error(err))
			return 1
		}
	}
	fo := frontendOptions(cfg, log.Named("mcp"))
	fo.Observer = obs.forFrontend()
	fo.Tasks = taskStore
	// execute_code's description follows the upstreams' tools.
	fo.ToolsListChanged = hub != nil
	if f := cfg.Cluster.SessionKeyFile; f != "" {
		if fo.SessionKey, err = cluster.ReadKey(f); err != nil {
			log.Error("cluster", zap.Error(err))
			return 2
		}
	}
	srv, err = frontend.New(fo)
	if err != nil {
		log.Error("front end", zap.Error(err))
		return 1
	}
	toolOpts := tools.Options{
		Executor:         exec,
		Languages:        engine.Languages(),
		RequestTimeout:   cfg.Limits.RequestTimeout.Duration,
		MaxOutputBytes:   cfg.Limits.MaxOutputBytes,
		MaxWaitingInputs: cfg.Protocol.MaxWaitingInputsPerPrincipal,
		Network:          net.Enabled(),
		Upstreams:        hub,
		Packages:         installer(cfg, exec),
		// shared by the languages' signatures
		DescriptionBudget: cfg.CodeMode.DescriptionBudget,
		Logger:            log.Named("tools"),
	}
	if err := tools.Register(srv, toolOpts); err != nil {
		log.Error("tools", zap.Error(err))
		return 1
	}
	renew := func() {
		if err := tools.UpstreamToolsChanged(srv, toolOpts); err != nil {
			log.Warn("execute_code's description", zap.Error(err))
		}
	}
	upstreamsChanged.Store(&renew)
	if a := cfg.Server.AdminListen; a != "" {
		h := admin.Handler(admin.Options{Metrics: obs.metrics, Listen: a, Status: &admin.StatusSources{
			Version: version, Started: started, Limits: limitsShown(cfg, engine.MemoryBudget()),
			Calls: srv.Running, Health: mgr.Health, Streams: srv.OpenStreams,
			GuestMemory: func() (int64, int64) { return engine.MemoryBytes(), engine.MemoryBudget() },
			Workspaces:  view, Errors: obs.errors, Network: net.Recent,
			Tasks:     func() []frontend.TaskInfo { return srv.Tasks(statusTasks) },
			Upstreams: upstreams,
		}})
		if err := serveAdmin(a, h, log.Named("admin")); err != nil {
			log.Error("admin listener", zap.Error(err))
			return 1
		}
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if *stdio {
		return serveStdio(srv, mgr, cfg, log, sigs)
	}
	return serveHTTP(srv, mgr, cfg, log, sigs)
}

// principalShare is the most of the memory budget one principal's live
// interpreters may hold (limits.max_memory_per_principal_mib): half the
// budget where tokens make several principals, the whole of it for the
// one local principal, unless the configuration says.
func principalShare(cfg config.Config, budget int64) int64 {
	if n := cfg.Limits.MaxMemoryPerPrincipalMiB; n > 0 {
		return int64(n) << 20
	}
	if cfg.Server.AuthTokensFile != "" {
		return budget / 2
	}
	return 0
}

// principalDisk is workspace.max_principal_disk_mib after its default:
// eight workspaces' quotas where tokens make several principals, no limit
// for the one local principal (0 for the registry: none).
func principalDisk(cfg config.Config) int {
	switch n := cfg.Workspace.MaxPrincipalDiskMiB; {
	case n > 0:
		return n
	case n == 0 && cfg.Server.AuthTokensFile != "":
		return 8 * cfg.Workspace.MaxDiskMiB
	}
	return 0
}

// principalWorkspaces is workspace.max_workspaces_per_principal after its
// default: 1024 where tokens make several principals, no limit for the
// one local principal.
func principalWorkspaces(cfg config.Config) int {
	switch n := cfg.Workspace.MaxWorkspacesPerPrincipal; {
	case n > 0:
		return n
	case n == 0 && cfg.Server.AuthTokensFile != "":
		return 1024
	}
	return 0
}

// frontendOptions maps the configuration onto the front end's options.
func frontendOptions(cfg config.Config, log *zap.Logger) frontend.Options {
	return frontend.Options{
		Version:                version,
		Logger:                 log,
		Path:                   cfg.Server.Path,
		Listen:                 cfg.Server.Listen,
		AllowedOrigins:         cfg.Server.AllowedOrigins,
		AuthTokensFile:         cfg.Server.AuthTokensFile,
		MaxBodyBytes:           cfg.Server.MaxBodyBytes,
		MaxStreamsPerPrincipal: cfg.Server.MaxStreams,
		ReadTimeout:            cfg.Server.ReadTimeout.Duration,
		CancelOnDisconnect:     cfg.Protocol.CancelOnDisconnect,
		ProgressHeartbeat:      cfg.Protocol.ProgressHeartbeat.Duration,
		SessionIdleTTL:         cfg.Protocol.SessionIdleTTL.Duration,
		InputTimeout:           cfg.Protocol.InputTimeout.Duration,
		TaskAfter:              cfg.Protocol.TaskAfter.Duration,
	}
}

func serveHTTP(srv *frontend.Server, mgr *workspace.Manager, cfg config.Config, log *zap.Logger, sigs <-chan os.Signal) int {
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		log.Error("listen", zap.Error(err))
		return 1
	}
	conns := &connGauge{serving: map[net.Conn]bool{}}
	hs := &http.Server{
		Handler:           conns.wrap(srv.Handler()),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.Duration,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
		ConnContext:       conns.remember,
		ConnState:         conns.track,
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
			// Stop accepting at once; the calls in flight are answered by
			// srv.Shutdown; then, once the answers have left, every other
			// connection (idle keep-alives, connections that never sent a
			// whole request) is closed, without waiting for net/http to
			// find it idle, which takes seconds for a new connection.
			go func() { _ = hs.Shutdown(context.Background()) }()
			shutdown(srv, cfg.Server.ShutdownGrace.Duration, sigs, log)
			conns.waitIdle(closeWait)
			_ = hs.Close()
			if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("serve", zap.Error(err))
			}
			log.Info("stopped")
			return 0
		}
	}
}

// statusTasks is how many tasks the status page lists.
const statusTasks = 50

// closeWait bounds how long shutdown waits for answers already handed to
// net/http to leave, after every call has answered.
const closeWait = 5 * time.Second

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
			log.Info("shutting down", zap.String("signal", sig.String()), zap.Duration("grace", cfg.Server.ShutdownGrace.Duration))
			mgr.Drain()
			shutdown(srv, cfg.Server.ShutdownGrace.Duration, sigs, log)
			return 0
		}
	}
}

// shutdown stops srv: the calls in flight get grace to finish and are then
// told execd is shutting down. A second SIGINT or SIGTERM ends the grace
// at once; the calls are still answered. A third ends the process at once.
//
// Whatever blocks (a call that does not end, a read of a file system that
// hangs), the process ends by the hard deadline, armed here: the grace,
// the wait for the answers to leave, the grace of saving the workspaces,
// and a margin. What was not saved by then is lost, and its workspaces
// say so on their next call, as after a crash.
func shutdown(srv *frontend.Server, grace time.Duration, sigs <-chan os.Signal, log *zap.Logger) {
	armHardDeadline(2*grace+closeWait+hardMargin, log, exitNow)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		n := 1
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if sig == syscall.SIGHUP {
					continue
				}
				if n++; n >= 3 {
					log.Warn("stopping at once", zap.String("signal", sig.String()))
					exitNow(1)
				}
				log.Info("ending the shutdown grace", zap.String("signal", sig.String()))
				cancel()
			}
		}
	}()
	srv.Shutdown(ctx)
}

// hardMargin is what the hard deadline of a shutdown allows beyond the
// waits it is made of.
const hardMargin = 10 * time.Second

// exitNow ends the process with code, the logs flushed.
var exitNow = func(code int) { os.Exit(code) }

// armHardDeadline ends the process with code 1 if it is still running
// after d. Once armed it is never disarmed: a shutdown that finishes
// returns from main before it fires.
func armHardDeadline(d time.Duration, log *zap.Logger, exit func(int)) *time.Timer {
	return time.AfterFunc(d, func() {
		log.Error("shutdown passed its hard deadline (twice server.shutdown_grace, plus the wait for answers and a margin): "+
			"something did not end (a call, or a file operation on a stalled file system); exiting now, without saving what is left",
			zap.Duration("deadline", d))
		_ = log.Sync()
		exit(1)
	})
}

// connGauge tracks the HTTP connections that are serving a request: from
// the handler's start until net/http has written the response and the
// connection is idle again. A connection still reading a request's headers
// is not serving one.
type connGauge struct {
	mu      sync.Mutex
	serving map[net.Conn]bool
}

type connKey struct{}

// remember is the server's ConnContext: a request's context knows its
// connection.
func (g *connGauge) remember(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

func (g *connGauge) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			g.mu.Lock()
			g.serving[c] = true
			g.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (g *connGauge) track(c net.Conn, st http.ConnState) {
	if st == http.StateIdle || st == http.StateHijacked || st == http.StateClosed {
		g.mu.Lock()
		delete(g.serving, c)
		g.mu.Unlock()
	}
}

// waitIdle waits, at most max, until no connection is serving a request.
func (g *connGauge) waitIdle(max time.Duration) {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		g.mu.Lock()
		n := len(g.serving)
		g.mu.Unlock()
		if n == 0 {
			return
		}
	}
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

// newLogger makes the stderr logger; with recent, warnings and errors are
// also kept for the status page.
func newLogger(c config.Log, recent *admin.RecentErrors) (*zap.Logger, error) {
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
	// stderr is a pipe, a terminal or the journal: fsync on it fails with
	// EINVAL, so a flush is a write and no more.
	ws := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(writerOnly{os.Stderr}), Size: 256 << 10, FlushInterval: logFlushEvery}
	core := zapcore.NewCore(enc, ws, lvl)
	if recent != nil {
		core = zapcore.NewTee(core, recent.Core())
	}
	return zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Level >= zapcore.WarnLevel {
			return ws.Sync()
		}
		return nil
	})), nil
}

const logFlushEvery = 200 * time.Millisecond

// writerOnly hides the Sync method of what it wraps.
type writerOnly struct{ io.Writer }

// installer is the Executor's package installer (install_packages), nil
// when it has none or [packages] turns both ecosystems off.
func installer(cfg config.Config, exec workspace.Executor) workspace.Installer {
	if !cfg.Packages.NPM && !cfg.Packages.Python {
		return nil
	}
	in, _ := exec.(workspace.Installer)
	return in
}
