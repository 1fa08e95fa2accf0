package econ

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/dburl"
	"github.com/shardwise/shardwise/internal/health"
	"github.com/shardwise/shardwise/internal/nodehttp"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// HostConfig configures Host: one economy node as its own process.
type HostConfig struct {
	// Coord is the etcd connection. Required (its Endpoints).
	Coord coord.ClientConfig
	// Name is the node's member name. Required.
	Name string
	// StoreURL is the shared store: "sqlite:///PATH" (the processes of one
	// machine may share the file) or "postgres://…". Required.
	StoreURL string
	// ListenAddr is where the gRPC service listens. Default "127.0.0.1:0"
	// (a free port).
	ListenAddr string
	// AdvertiseAddr is the address published for callers. Default the one
	// listened on.
	AdvertiseAddr string
	// CertDir is a directory written by "shardwise certs" (link's cluster
	// certificates) holding a certificate for Name: the service then uses
	// mutual TLS, and callers present a certificate of the same cluster CA
	// (ClientTLS). Empty means plaintext, allowed only when ListenAddr is a
	// loopback address.
	CertDir string
	// MetricsAddr, if set, is where Host serves Prometheus metrics at
	// /metrics (the node's shardwise_econ_* series) and the probes
	// /healthz (alive) and /readyz (ready: its view ready; 503 while it
	// joins, once it is fenced, and while it stops); the address listened
	// on is published in the member record as Addrs["metrics"].
	MetricsAddr string
	// Node holds the netting settings (TTL, EpochMaxAge, MaxMovements,
	// SweepBound, RotateEvery, SweepEvery, ReadyWait, SettleLease,
	// CloseTimeout, Clock); its Name, Coord, Store, Addr and Logger are set
	// by Host.
	Node Config
	// Logger; default discard.
	Logger *slog.Logger
	// OnReady, if set, is called once the service listens and the node is
	// registered.
	OnReady func(HostReady)
}

// HostReady says where a started Host can be reached.
type HostReady struct {
	Name string
	// Addr is the service's listening address; Advertised what callers use.
	Addr, Advertised string
	// MetricsAddr is where /metrics is served, or "".
	MetricsAddr string
	// Node is the running node, for status lines.
	Node *Node
}

// Validate reports the first invalid field, naming it as HostConfig.<Field>.
func (c HostConfig) Validate() error {
	switch {
	case c.Name == "":
		return errcode.Config("HostConfig.Name", c.Name, "is required")
	case c.StoreURL == "":
		return errcode.Config("HostConfig.StoreURL", c.StoreURL, `is required: "sqlite:///PATH" or "postgres://…"`)
	}
	if _, _, err := dburl.Parse("HostConfig.StoreURL", c.StoreURL); err != nil {
		return err
	}
	if err := c.Coord.Validate(); err != nil {
		var ce *errcode.ConfigError
		if errors.As(err, &ce) {
			return errcode.Config("HostConfig.Coord."+strings.TrimPrefix(ce.Field, "ClientConfig."), ce.Value, ce.Reason)
		}
		return err
	}
	listen := c.ListenAddr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return errcode.Config("HostConfig.ListenAddr", c.ListenAddr, "must be host:port (port 0 picks a free one)")
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			return errcode.Config("HostConfig.AdvertiseAddr", c.AdvertiseAddr, "must be host:port")
		}
	}
	if c.CertDir == "" && !isLoopback(listen) {
		return errcode.Config("HostConfig.CertDir", c.CertDir, "is required unless the service listens on a loopback address (without certificates it is plaintext)")
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return errcode.Config("HostConfig.MetricsAddr", c.MetricsAddr, "must be host:port (port 0 picks a free one)")
		}
	}
	return c.Node.validateSettings("HostConfig.Node.")
}

// ClientTLS returns the TLS configuration a caller of a Host with CertDir
// uses: the caller's own certificate (name's, from a "shardwise certs"
// directory) and the cluster CA to verify the node with.
func ClientTLS(certDir, name string) (*tls.Config, error) {
	certs, err := link.NewCertReloader(certDir, name)
	if err != nil {
		return nil, err
	}
	// Read again at every new connection: a rotated certificate is
	// presented without a restart.
	return &tls.Config{GetClientCertificate: certs.GetClientCertificate, RootCAs: certs.Pool(), MinVersion: tls.VersionTLS13}, nil
}

// Host runs one economy node as a process until ctx ends or its lease is
// lost: it connects to etcd, opens the store, listens, starts the node
// (registered with the service address), serves the gRPC service and the
// metrics, and at the end closes the node gracefully (its sessions
// settled, its registration ended) before it stops serving. A lost lease
// returns an error with code ECON.LEASE_LOST.
func Host(ctx context.Context, cfg HostConfig) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if cfg.CertDir != "" {
		// Read again at every new connection: a rotated certificate is
		// served without a restart.
		certs, err := link.NewCertReloader(cfg.CertDir, cfg.Name)
		if err != nil {
			return errcode.Config("HostConfig.CertDir", cfg.CertDir, err.Error())
		}
		creds = credentials.NewTLS(&tls.Config{
			GetCertificate: certs.GetCertificate,
			ClientCAs:      certs.Pool(),
			ClientAuth:     tls.RequireAndVerifyClientCert,
			MinVersion:     tls.VersionTLS13,
		})
	}
	cl, err := coord.Connect(ctx, cfg.Coord)
	if err != nil {
		return err
	}
	defer cl.Close()
	// A name a live member holds is refused before the store is opened:
	// opening a SQLite store creates its file, and a refused node should
	// leave nothing behind. Start's claim stays the authority (a node
	// that takes the name after this look is refused there).
	if err := nameFree(ctx, cl, cfg.Name); err != nil {
		return err
	}
	store, err := sqlstore.Open(ctx, cfg.StoreURL)
	if err != nil {
		return renameURLField(err)
	}
	defer store.Close()
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("econ: listen on %s: %w", cfg.ListenAddr, err)
	}
	advertised := cfg.AdvertiseAddr
	if advertised == "" {
		advertised = lis.Addr().String()
	}

	// The metrics listen, and are served, before the node registers: its
	// member record names their address (Addrs["metrics"]) from the
	// start, and /healthz and /readyz answer while it joins.
	var (
		ml          net.Listener
		metricsAddr string
		metricsSrv  *http.Server
		reg         = prometheus.NewRegistry()
		hh          = &hostHealth{}
	)
	metricsErr := make(chan error, 1)
	stopMetrics := func() {
		if metricsSrv != nil {
			_ = metricsSrv.Close()
			<-metricsErr
		}
	}
	if cfg.MetricsAddr != "" {
		if ml, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			lis.Close()
			return fmt.Errorf("econ: metrics listen on %s: %w", cfg.MetricsAddr, err)
		}
		metricsAddr = ml.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		health.Handle(mux, hh.check)
		metricsSrv = nodehttp.NewServer(mux, nodehttp.Timeouts{ReadHeader: 5 * time.Second})
		go func() { metricsErr <- metricsSrv.Serve(ml) }()
	}

	ncfg := cfg.Node
	ncfg.Name, ncfg.Coord, ncfg.Store, ncfg.Addr, ncfg.MetricsAddr, ncfg.Logger = cfg.Name, cl, store, advertised, metricsAddr, log
	node, err := Start(ctx, ncfg)
	if err != nil {
		lis.Close()
		stopMetrics()
		return err
	}
	reg.MustRegister(node.Collectors()...)
	hh.node.Store(node)
	gs := grpc.NewServer(append(ServerOptions(), grpc.Creds(creds))...)
	NewServer(node, WithServerLogger(log)).Register(gs)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()

	if cfg.OnReady != nil {
		cfg.OnReady(HostReady{Name: cfg.Name, Addr: lis.Addr().String(), Advertised: advertised, MetricsAddr: metricsAddr, Node: node})
	}

	var runErr error
	serving := true
	select {
	case <-ctx.Done():
	case <-node.Registration().Lost():
		runErr = fmt.Errorf("%w: %w", ErrLeaseLost, node.Registration().Err())
	case err := <-served:
		serving = false
		runErr = fmt.Errorf("econ: serve: %w", err)
	}
	// Stop recording first (calls in flight answer ECON.CLOSED and their
	// callers go elsewhere), settle, leave the membership; then stop serving.
	hh.stopping.Store(true)
	closeErr := node.Close()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		gs.Stop()
		<-stopped
	}
	if serving {
		<-served
	}
	stopMetrics()
	return errors.Join(runErr, closeErr)
}

// hostHealth is what an economy node's /readyz reads.
type hostHealth struct {
	node     atomic.Pointer[Node] // nil until Start returned
	stopping atomic.Bool
}

// check is the node's readiness (docs/operators.md): registered, its
// lease live, and its view ready (it and every other live member adopted
// the same view, so it records).
func (h *hostHealth) check(context.Context) (string, error) {
	n := h.node.Load()
	if h.stopping.Load() {
		return "", errors.New("stopping")
	}
	if n == nil {
		return "", errors.New("joining: not a member yet")
	}
	st := n.Status()
	switch {
	case st.Closed:
		return "", errors.New("stopping")
	case st.Fenced:
		return "", fmt.Errorf("fenced: %v", n.Registration().Err())
	case !st.Ready:
		return "", fmt.Errorf("joining: view [%s] not ready (every member must adopt it)", strings.Join(st.View, " "))
	}
	return fmt.Sprintf("view [%s] ready", strings.Join(st.View, " ")), nil
}

// nameFree returns a *coord.NameTakenError if a live member holds name.
func nameFree(ctx context.Context, cl *coord.Client, name string) error {
	members, err := cl.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Name == name {
			return &coord.NameTakenError{Name: name, HeldBy: m.ID.String()}
		}
	}
	return nil
}

func renameURLField(err error) error {
	var ce *errcode.ConfigError
	if errors.As(err, &ce) && ce.Field == "url" {
		return errcode.Config("HostConfig.StoreURL", ce.Value, ce.Reason)
	}
	return err
}
