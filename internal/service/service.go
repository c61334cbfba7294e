// Package service is htq serve as a library: Start opens the storage,
// loads (or generates) the API token and the webhook signing secret, and
// runs the three parts of the service until Shutdown:
//
//   - the HTTP API (package api) on Config.Addr, with the web dashboard
//     (package ui) under /ui/;
//   - the URL worker, an htq.Server that serves every queue whose mode is a
//     URL mode (real_time, timing, variable) and runs each URL task through
//     package dispatch, storing the answer as the task's result;
//   - the schedule runner, an htq.Scheduler fed with the schedules stored
//     through the API.
//
// Several services may share one Redis: API nodes keep no state of their
// own, the URL workers share the queues through leases, and the schedulers
// claim each tick in the storage, so any process can be killed.
//
// cmd/htq's `serve` command is a few lines around Start.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/api"
	"github.com/htqueue/htq/internal/apitoken"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/internal/metrics"
	"github.com/htqueue/htq/internal/model"
	"github.com/htqueue/htq/internal/storage"
	"github.com/htqueue/htq/internal/ui"
	"github.com/htqueue/htq/webhook"
)

// Service is a running htq serve.
type Service struct {
	cfg    Config
	logger *slog.Logger

	storage  *htq.Storage
	meta     broker.MetaStore
	queues   *model.Cache
	disp     *dispatch.Dispatcher
	server   *htq.Server
	sched    *scheduleRunner
	http     *http.Server
	listener net.Listener

	// lastList is when urlQueues last read the queue list (only the
	// URL worker's refresher calls it, one call at a time).
	lastList time.Time

	// token is the configured API token; tokens holds the stored set when
	// none is configured.
	token  string
	tokens *apitoken.Checker

	// apiCtx bounds the API handler's background work; cancelled at
	// shutdown so long-polling pull workers return at once.
	apiCtx    context.Context
	apiCancel context.CancelFunc

	ready chan struct{}
	done  chan struct{}

	mu           sync.Mutex
	err          error // the first fatal error of a running part
	shutdownOnce sync.Once
	shutdownErr  error
}

// Start starts htq serve as cfg says and returns once the API accepts
// connections and the URL worker and schedule runner run. ctx bounds the
// start only (opening the storage, reading the stored secrets); Shutdown
// stops the service. An invalid cfg is an error wrapping ErrInvalidConfig
// that names every bad setting; nothing is started then.
func Start(ctx context.Context, cfg Config) (_ *Service, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	loc, _ := time.LoadLocation(cfg.TimeZone) // checked by Validate
	s := &Service{
		cfg:    cfg,
		logger: cfg.Logger.With("component", "htq.service"),
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	// Whatever was started before a failure is stopped again.
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()

	// Listen first: a port in use fails the start before anything runs.
	// Connections wait in the backlog until the API serves them.
	s.listener, err = net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("service: listen on %s: %w", cfg.Addr, err)
	}
	cleanups = append(cleanups, func() { _ = s.listener.Close() })

	s.storage, err = htq.OpenWithOptions(ctx, cfg.storageURL(), htq.OpenOptions{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("service: open storage: %w", err)
	}
	cleanups = append(cleanups, func() { _ = s.storage.Close() })
	if err := s.storage.Ping(ctx); err != nil {
		return nil, fmt.Errorf("service: storage %s does not answer: %w", s.storage, err)
	}
	// The service's own records (queue model, schedules, secrets) live
	// beside the queues, in the storage's meta records.
	s.meta = storage.BrokerOf(s.storage)
	s.queues = model.NewCache(s.meta, 0)

	signer, err := s.loadSecrets(ctx)
	if err != nil {
		return nil, err
	}

	s.disp, err = dispatch.New(dispatch.Config{
		Signer:              signer,
		Allow:               cfg.AllowTargets,
		Timeout:             cfg.DispatchTimeout,
		MaxTimeout:          model.MaxRequestTimeout, // what the API lets a task ask for
		MaxIdleConnsPerHost: max(dispatch.DefaultMaxIdleConnsPerHost, cfg.Concurrency),
		TracerProvider:      cfg.TracerProvider,
		Propagator:          cfg.Propagator,
	})
	if err != nil {
		return nil, fmt.Errorf("service: URL worker: %w", err)
	}
	cleanups = append(cleanups, s.disp.Close)

	// The schedule runner exists before the API, which tells it about
	// changes; it starts after the API is built.
	s.sched = newScheduleRunner(s.storage, s.meta, loc, cfg.ScheduleReloadInterval, cfg.Logger)

	obs := metrics.New()
	s.apiCtx, s.apiCancel = context.WithCancel(context.Background())
	cleanups = append(cleanups, s.apiCancel)
	handler, err := api.New(api.Options{
		Storage:          s.storage,
		Token:            s.token,
		Tokens:           s.tokens,
		HTQAppKey:        cfg.HTQAppKey,
		HTQAppToken:      cfg.HTQAppToken,
		Location:         loc,
		MaxBodyBytes:     cfg.MaxBodyBytes,
		Logger:           cfg.Logger,
		Context:          s.apiCtx,
		Meta:             s.meta,
		Queues:           s.queues,
		CheckTarget:      s.checkTarget,
		SchedulesChanged: s.sched.reload,
		Metrics:          obs,
		// Negative keeps none: the API's 0.
		CompletedRetention: max(cfg.CompletedRetention, 0),
		DispatchTimeout:    cfg.DispatchTimeout,
		MetricsAuth:        cfg.metricsAuth(),
		EnqueueRetryFor:    cfg.StorageTimeout,
		CORSOrigins:        cfg.CORSOrigins,
		TracerProvider:     cfg.TracerProvider,
		Propagator:         cfg.Propagator,
		Pprof:              cfg.Pprof,
	})
	if err != nil {
		return nil, fmt.Errorf("service: API: %w", err)
	}
	handler, err = ui.New(handler, ui.Options{Token: s.Token, ReadOnly: cfg.UIReadOnly, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("service: dashboard: %w", err)
	}

	client := htq.NewClientWithOptions(s.storage, htq.ClientOptions{TracerProvider: cfg.TracerProvider, Propagator: cfg.Propagator})
	exec := &urlHandler{disp: s.disp, queues: s.queues, client: client, metrics: obs,
		logger:   cfg.Logger.With("component", "htq.urlworker"),
		defaults: model.Defaults{DispatchTimeout: cfg.DispatchTimeout, CompletedRetention: max(cfg.CompletedRetention, 0)}}
	s.server = htq.NewServer(s.storage, htq.Config{
		Concurrency:          cfg.Concurrency,
		QueueSource:          s.urlQueues,
		QueueRefreshInterval: cfg.QueueRefreshInterval,
		RetryDelayFunc:       retryDelay,
		IsFailure:            isFailure,
		ErrorHandler:         htq.ErrorHandlerFunc(exec.logFailure),
		BeforeArchiveLost:    exec.lostCallback,
		ShutdownTimeout:      cfg.ShutdownTimeout,
		Logger:               cfg.Logger,
		TracerProvider:       cfg.TracerProvider,
		Propagator:           cfg.Propagator,
	})
	if err := s.server.Start(exec); err != nil {
		return nil, fmt.Errorf("service: URL worker: %w", err)
	}
	cleanups = append(cleanups, s.server.Shutdown)

	if err := s.sched.start(); err != nil {
		return nil, fmt.Errorf("service: schedules: %w", err)
	}
	cleanups = append(cleanups, s.sched.shutdown)

	s.http = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.http.RegisterOnShutdown(s.apiCancel)
	go s.serve()
	close(s.ready)
	s.logger.Info("htq serve started", "addr", s.Addr(), "storage", s.storage.String(),
		"concurrency", cfg.Concurrency, "tz", loc.String(), "metrics_auth", cfg.metricsAuth())
	return s, nil
}

// loadSecrets settles the API token and the signing secrets: the
// configured ones, or those stored with the data, generated (and shown
// once) on the first start.
func (s *Service) loadSecrets(ctx context.Context) (*webhook.Signer, error) {
	var shown []string
	s.token = s.cfg.Token
	dataDir, embedded := storage.DataDir(s.cfg.Storage)
	if s.token != "" && embedded {
		// A token file left by a run without --token would mislead htq's
		// command line.
		if err := apitoken.RemoveFile(dataDir); err != nil {
			return nil, fmt.Errorf("service: %w", err)
		}
	}
	if s.token == "" {
		tok, created, err := storedSecret(ctx, s.meta, apitoken.CurrentKey, apitoken.Generate)
		if err != nil {
			return nil, fmt.Errorf("service: API token: %w", err)
		}
		if created {
			shown = append(shown, "API token (send it as \"Authorization: Bearer <token>\"):\n\n    "+tok+"\n")
		}
		var onChange func(string)
		if embedded {
			// The command line finds the token in this file while this
			// process holds the data directory locked.
			onChange = func(cur string) {
				if err := apitoken.WriteFile(dataDir, cur); err != nil {
					s.logger.Error("cannot mirror the rotated API token in the data directory", "err", err)
				}
			}
			if err := apitoken.WriteFile(dataDir, tok); err != nil {
				return nil, fmt.Errorf("service: %w", err)
			}
		}
		s.tokens, err = apitoken.NewChecker(ctx, s.meta, apitoken.CheckerOptions{OnChange: onChange, Logger: s.logger})
		if err != nil {
			return nil, fmt.Errorf("service: API token: %w", err)
		}
	}
	secrets := s.cfg.SigningSecrets
	if len(secrets) == 0 {
		sec, created, err := storedSecret(ctx, s.meta, SigningSecretKey, webhook.GenerateSecret)
		if err != nil {
			return nil, fmt.Errorf("service: signing secret: %w", err)
		}
		secrets = []string{sec}
		if created {
			shown = append(shown, "webhook signing secret (targets verify webhook-signature with it):\n\n    "+sec+"\n")
		}
	}
	signer, err := newSigner(secrets)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if len(shown) > 0 {
		msg := "htq serve: generated on this first start and stored with the data; shown only this once:\n\n"
		for _, m := range shown {
			msg += m + "\n"
		}
		if _, err := fmt.Fprint(s.cfg.Stdout, msg); err != nil {
			return nil, fmt.Errorf("service: print the generated secrets: %w", err)
		}
	}
	return signer, nil
}

// minQueueListInterval spaces the URL worker's reads of the queue list.
// The URL worker asks for the list again whenever a storage event names a
// queue it does not serve, and every pull queue is such a queue: without
// a bound, a busy pull queue would have the list read back to back.
const minQueueListInterval = 100 * time.Millisecond

// urlQueues is the URL worker's QueueSource: every queue whose mode is a
// URL mode, each with weight 1 (queues are served side by side). Calls
// closer than minQueueListInterval wait for it, so a new URL queue is
// served within about that time of its first task.
func (s *Service) urlQueues(ctx context.Context) (map[string]int, error) {
	if wait := time.Until(s.lastList.Add(minQueueListInterval)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	s.lastList = time.Now()
	qs, err := s.queues.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(qs))
	for _, q := range qs {
		if q.Mode.IsURL() {
			out[q.Name] = 1
		}
	}
	return out, nil
}

// checkTarget is the API's check of a URL task's target at enqueue: the
// dispatcher's guard on the URL as written. A malformed URL is an
// ErrInvalidArgument (400), a refused address a target error (422).
func (s *Service) checkTarget(_ context.Context, u *url.URL) error {
	err := s.disp.Guard().CheckURL(u)
	if errors.Is(err, dispatch.ErrInvalidRequest) {
		return fmt.Errorf("%w: URL task: %v", base.ErrInvalidArgument, err)
	}
	return err
}

// serve runs the HTTP server until Shutdown or a fatal error.
func (s *Service) serve() {
	err := s.http.Serve(s.listener)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.fail(fmt.Errorf("service: HTTP server: %w", err))
	}
}

// fail records a fatal error of a running part and stops the service.
func (s *Service) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.logger.Error("htq serve stopping after a fatal error", "err", err)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout+5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
}

// Addr returns the address the API listens on (with the port picked when
// Config.Addr asked for port 0).
func (s *Service) Addr() string { return s.listener.Addr().String() }

// URL returns the API's base URL, http://host:port, for clients on this
// machine.
func (s *Service) URL() string {
	addr := s.listener.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port))
}

// Storage returns the storage the service opened, for a Go program that
// runs the service and enqueues or inspects through the library as well
// (the service closes it at Shutdown).
func (s *Service) Storage() *htq.Storage { return s.storage }

// Token returns the API token in force: the configured one, or the
// current one stored with the data (which a rotation changes).
func (s *Service) Token() string {
	if s.tokens != nil {
		return s.tokens.Current()
	}
	return s.token
}

// Ready is closed once the service takes requests (Start closes it before
// it returns).
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Done is closed once the service has stopped: after Shutdown, or after a
// fatal error of one of its parts (see Err).
func (s *Service) Done() <-chan struct{} { return s.done }

// Err returns the fatal error that stopped the service, or nil.
func (s *Service) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Shutdown stops the service gracefully, in this order: the API stops
// accepting connections and finishes the requests in flight (long polls
// are cut short); the schedule runner stops; the URL worker stops fetching,
// lets running dispatches finish for up to Config.ShutdownTimeout and
// sends those still running back to pending; the storage is closed. When
// ctx ends first, the remaining connections are closed and the shutdown
// goes on. It is safe to call more than once; later calls wait for the
// first and return its result.
func (s *Service) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		defer close(s.done)
		s.logger.Info("htq serve shutting down")
		var errs []error
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("HTTP server: %w", err))
			_ = s.http.Close()
		}
		s.apiCancel()
		s.sched.shutdown()
		s.server.Shutdown()
		s.disp.Close()
		if err := s.storage.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close storage: %w", err))
		}
		if len(errs) > 0 {
			s.shutdownErr = fmt.Errorf("service: shutdown: %w", errors.Join(errs...))
		}
		s.logger.Info("htq serve stopped")
	})
	<-s.done
	return s.shutdownErr
}
