package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"

	"github.com/shardwise/shardwise/errcode"
)

// EmbeddedConfig configures an etcd member run inside this process. The zero
// value is not usable: DataDir is required. Defaults are filled by
// withDefaults and documented on each field.
type EmbeddedConfig struct {
	// DataDir holds etcd's WAL and snapshots. Required. Reusing a directory
	// restarts the same single-member cluster with its data.
	DataDir string
	// Name is the etcd member name. Default "shardwise".
	Name string
	// Heartbeat is etcd's raft tick. Default 100ms.
	Heartbeat time.Duration
	// Election is etcd's election timeout; at least 5 heartbeats. Default
	// 10 heartbeats. etcd refuses lease TTLs shorter than 1.5 elections
	// (rounded up to a second), so a short Election allows short TTLs.
	Election time.Duration
	// ClientPort is the port clients connect to on 127.0.0.1. Default 0:
	// a free port, chosen at start (the peer port is always chosen so).
	ClientPort int
	// UnsafeNoFsync skips fsync. Only for tests and throwaway demos: a crash
	// can lose acknowledged writes. Default false.
	UnsafeNoFsync bool
	// Logger receives etcd's own records at EtcdLogLevel and above, and
	// coord's. Default: discard.
	Logger *slog.Logger
	// EtcdLogLevel is the lowest etcd record passed on to Logger. Default
	// slog.LevelError ("quiet"): etcd logs several lines a second at info.
	EtcdLogLevel slog.Leveler
}

const (
	defaultEmbeddedName = "shardwise"
	defaultHeartbeat    = 100 * time.Millisecond
	// bindAttempts bounds retries when a port we picked as free was taken by
	// someone else before etcd bound it.
	bindAttempts = 8
)

func (c EmbeddedConfig) withDefaults() EmbeddedConfig {
	if c.Name == "" {
		c.Name = defaultEmbeddedName
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = defaultHeartbeat
	}
	if c.Election == 0 {
		c.Election = 10 * c.Heartbeat
	}
	if c.EtcdLogLevel == nil {
		c.EtcdLogLevel = slog.LevelError
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first field that cannot work, after defaults.
func (c EmbeddedConfig) Validate() error {
	c = c.withDefaults()
	if c.DataDir == "" {
		return errcode.Config("EmbeddedConfig.DataDir", c.DataDir, "required")
	}
	if strings.ContainsAny(c.Name, ",= ") {
		return errcode.Config("EmbeddedConfig.Name", c.Name, "must not contain ',', '=' or spaces (etcd's initial-cluster syntax)")
	}
	if c.Heartbeat < time.Millisecond {
		return errcode.Config("EmbeddedConfig.Heartbeat", c.Heartbeat, "must be at least 1ms")
	}
	if c.Election < 5*c.Heartbeat {
		return errcode.Config("EmbeddedConfig.Election", c.Election, "must be at least 5 heartbeats")
	}
	if c.Election > 50*time.Second {
		return errcode.Config("EmbeddedConfig.Election", c.Election, "must be at most 50s (etcd's limit)")
	}
	if c.ClientPort < 0 || c.ClientPort > 65535 {
		return errcode.Config("EmbeddedConfig.ClientPort", c.ClientPort, "must be a TCP port, 1 to 65535 (0: a free one)")
	}
	return nil
}

// Embedded is an etcd member running in this process, serving clients and
// peers on 127.0.0.1 ports chosen free at start.
type Embedded struct {
	etcd      *embed.Etcd
	name      string
	endpoints []string
	peerURL   string
	closeOnce sync.Once
}

// StartEmbedded starts a single-member etcd cluster and returns when it
// serves requests (or ctx ends).
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.ClientPort != 0 {
		// Say so plainly when the port asked for is taken, rather than
		// retrying what cannot change.
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.ClientPort))
		if err != nil {
			return nil, fmt.Errorf("coord: start embedded etcd: client port %d: %w", cfg.ClientPort, err)
		}
		_ = l.Close()
	}
	var lastErr error
	for range bindAttempts {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		spec := memberSpec{name: cfg.Name, dir: cfg.DataDir, clientPort: ports[0], peerPort: ports[1]}
		if cfg.ClientPort != 0 {
			spec.clientPort = cfg.ClientPort
		}
		e, err := startMember(cfg, spec, spec.initialCluster())
		if err != nil {
			if isAddrInUse(err) {
				lastErr = err
				continue
			}
			return nil, err
		}
		if err := waitReady(ctx, e); err != nil {
			_ = e.Close()
			return nil, err
		}
		cfg.Logger.Debug("coord: embedded etcd ready", "name", cfg.Name, "endpoints", e.endpoints)
		return e, nil
	}
	return nil, fmt.Errorf("coord: start embedded etcd: no free port after %d attempts: %w", bindAttempts, lastErr)
}

// Endpoints are the client URLs to pass to Connect.
func (e *Embedded) Endpoints() []string { return append([]string(nil), e.endpoints...) }

// Name is the etcd member name.
func (e *Embedded) Name() string { return e.name }

// IsLeader reports whether this member currently leads the raft group
// (false once it has stopped).
func (e *Embedded) IsLeader() bool {
	return e.running() && e.etcd.Server.Leader() == e.etcd.Server.MemberID()
}

func (e *Embedded) running() bool {
	select {
	case <-e.etcd.Server.StopNotify():
		return false
	default:
		return true
	}
}

// Close stops the member and returns after its servers and goroutines have
// stopped. Close clients with open watches first: etcd waits for open
// streams up to its request timeout before cutting them. Idempotent.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		e.etcd.Close()
		// Err() is closed by etcd's Close once every server goroutine is
		// done; draining it makes that ordering ours too.
		for range e.etcd.Err() {
		}
	})
	return nil
}

// EmbeddedCluster is a multi-member etcd cluster inside this process, for
// tests and demos that need to lose a member.
type EmbeddedCluster struct {
	members []*Embedded
}

// StartEmbeddedCluster starts n members with data under dir (one
// subdirectory each) and returns when all serve. cfg's DataDir and Name are
// ignored; its timing, fsync and logging fields apply to every member.
func StartEmbeddedCluster(ctx context.Context, n int, dir string, cfg EmbeddedConfig) (*EmbeddedCluster, error) {
	if n < 1 || n > 9 {
		return nil, errcode.Config("n", n, "member count must be between 1 and 9")
	}
	if dir == "" {
		return nil, errcode.Config("dir", dir, "required")
	}
	cfg.DataDir = dir
	cfg.Name = defaultEmbeddedName
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var lastErr error
	for attempt := range bindAttempts {
		ports, err := freePorts(2 * n)
		if err != nil {
			return nil, err
		}
		specs := make([]memberSpec, n)
		initial := make([]string, n)
		for i := range specs {
			specs[i] = memberSpec{
				name: fmt.Sprintf("m%d", i),
				// A failed attempt may have written a WAL naming its
				// ports, so each attempt gets fresh directories.
				dir:        filepath.Join(dir, fmt.Sprintf("attempt%d", attempt), fmt.Sprintf("m%d", i)),
				clientPort: ports[2*i],
				peerPort:   ports[2*i+1],
			}
			initial[i] = specs[i].initialCluster()
		}
		c := &EmbeddedCluster{}
		var startErr error
		for _, s := range specs {
			e, err := startMember(cfg, s, strings.Join(initial, ","))
			if err != nil {
				startErr = err
				break
			}
			c.members = append(c.members, e)
		}
		if startErr != nil {
			_ = c.Close()
			if isAddrInUse(startErr) {
				lastErr = startErr
				continue
			}
			return nil, startErr
		}
		for _, e := range c.members {
			if err := waitReady(ctx, e); err != nil {
				_ = c.Close()
				return nil, err
			}
		}
		return c, nil
	}
	return nil, fmt.Errorf("coord: start embedded etcd cluster: no free ports after %d attempts: %w", bindAttempts, lastErr)
}

// Members returns the cluster's members in start order.
func (c *EmbeddedCluster) Members() []*Embedded { return append([]*Embedded(nil), c.members...) }

// Endpoints returns every member's client URLs.
func (c *EmbeddedCluster) Endpoints() []string {
	var eps []string
	for _, e := range c.members {
		eps = append(eps, e.endpoints...)
	}
	return eps
}

// Close stops every member and returns when all have stopped. Followers go
// first: a leader that stops while followers run hands its leadership over
// (up to etcd's request timeout when the transferee is stopping too), which
// is pointless when the whole cluster goes. Idempotent.
func (c *EmbeddedCluster) Close() error {
	var followers, leaders []*Embedded
	for _, e := range c.members {
		if e.IsLeader() {
			leaders = append(leaders, e)
		} else {
			followers = append(followers, e)
		}
	}
	for _, group := range [][]*Embedded{followers, leaders} {
		var wg sync.WaitGroup
		for _, e := range group {
			wg.Go(func() { _ = e.Close() })
		}
		wg.Wait()
	}
	return nil
}

type memberSpec struct {
	name                 string
	dir                  string
	clientPort, peerPort int
}

func (s memberSpec) clientURL() url.URL {
	return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort))}
}

func (s memberSpec) peerURL() url.URL {
	return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.peerPort))}
}

func (s memberSpec) initialCluster() string {
	u := s.peerURL()
	return s.name + "=" + u.String()
}

func startMember(cfg EmbeddedConfig, s memberSpec, initialCluster string) (*Embedded, error) {
	ec := embed.NewConfig()
	ec.Name = s.name
	ec.Dir = s.dir
	cu, pu := s.clientURL(), s.peerURL()
	ec.ListenClientUrls = []url.URL{cu}
	ec.AdvertiseClientUrls = []url.URL{cu}
	ec.ListenPeerUrls = []url.URL{pu}
	ec.AdvertisePeerUrls = []url.URL{pu}
	ec.InitialCluster = initialCluster
	ec.InitialClusterToken = "shardwise-embedded"
	ec.TickMs = uint(cfg.Heartbeat / time.Millisecond)
	ec.ElectionMs = uint(cfg.Election / time.Millisecond)
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(cfg.Logger, slogToZapLevel(cfg.EtcdLogLevel.Level())))
	// No metrics listener and no v2 gateway: the embedded member serves
	// shardwise only, over gRPC.
	ec.EnableGRPCGateway = false
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("coord: start embedded etcd member %s: %w", s.name, err)
	}
	return &Embedded{etcd: e, name: s.name, endpoints: []string{cu.String()}, peerURL: pu.String()}, nil
}

func waitReady(ctx context.Context, e *Embedded) error {
	select {
	case <-e.etcd.Server.ReadyNotify():
		return nil
	case err := <-e.etcd.Err():
		return fmt.Errorf("coord: embedded etcd member %s stopped while starting: %w", e.name, err)
	case <-ctx.Done():
		return fmt.Errorf("coord: embedded etcd member %s not ready: %w", e.name, context.Cause(ctx))
	}
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1. They are
// released before etcd binds them, so another process can take one in
// between; callers retry on EADDRINUSE. (embed cannot take a listener we
// already hold, and a peer URL must be known before any member starts.)
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("coord: find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func isAddrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

func slogToZapLevel(l slog.Level) zapcore.Level {
	switch {
	case l < slog.LevelInfo:
		return zapcore.DebugLevel
	case l < slog.LevelWarn:
		return zapcore.InfoLevel
	case l < slog.LevelError:
		return zapcore.WarnLevel
	default:
		return zapcore.ErrorLevel
	}
}
