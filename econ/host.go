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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/dburl"
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
	// /metrics (the node's shardwise_econ_* series); the address listened
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
	cert, pool, err := link.LoadIdentity(certDir, name)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
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
		cert, pool, err := link.LoadIdentity(cfg.CertDir, cfg.Name)
		if err != nil {
			return errcode.Config("HostConfig.CertDir", cfg.CertDir, err.Error())
		}
		creds = credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS13,
		})
	}
	cl, err := coord.Connect(ctx, cfg.Coord)
	if err != nil {
		return err
	}
	defer cl.Close()
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

	// The metrics listen before the node registers, so that its member
	// record names their address (Addrs["metrics"]) from the start.
	var (
		ml          net.Listener
		metricsAddr string
	)
	if cfg.MetricsAddr != "" {
		if ml, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			lis.Close()
			return fmt.Errorf("econ: metrics listen on %s: %w", cfg.MetricsAddr, err)
		}
		metricsAddr = ml.Addr().String()
	}

	ncfg := cfg.Node
	ncfg.Name, ncfg.Coord, ncfg.Store, ncfg.Addr, ncfg.MetricsAddr, ncfg.Logger = cfg.Name, cl, store, advertised, metricsAddr, log
	node, err := Start(ctx, ncfg)
	if err != nil {
		lis.Close()
		if ml != nil {
			ml.Close()
		}
		return err
	}
	gs := grpc.NewServer(append(ServerOptions(), grpc.Creds(creds))...)
	NewServer(node, WithServerLogger(log)).Register(gs)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()

	var metricsSrv *http.Server
	metricsErr := make(chan error, 1)
	if ml != nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(node.Collectors()...)
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { metricsErr <- metricsSrv.Serve(ml) }()
	}
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
	if metricsSrv != nil {
		_ = metricsSrv.Close()
		<-metricsErr
	}
	return errors.Join(runErr, closeErr)
}

func renameURLField(err error) error {
	var ce *errcode.ConfigError
	if errors.As(err, &ce) && ce.Field == "url" {
		return errcode.Config("HostConfig.StoreURL", ce.Value, ce.Reason)
	}
	return err
}
