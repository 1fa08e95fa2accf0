package coord

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
)

// ClientConfig configures a connection to an etcd cluster (real or
// embedded). Defaults are filled by withDefaults and documented per field.
type ClientConfig struct {
	// Endpoints are etcd client URLs ("http://10.0.0.1:2379") or host:port
	// pairs. Required: there is no implicit localhost.
	Endpoints []string
	// DialTimeout bounds the first connection. Default 5s.
	DialTimeout time.Duration
	// Prefix namespaces every key this package writes, so several
	// shardwise clusters (or tests) can share one etcd. Must start and end
	// with "/". Default "/shardwise/".
	Prefix string
	// Logger receives coord's records and the etcd client's errors.
	// Default: discard.
	Logger *slog.Logger
	// Clock is used only for the local lease deadline of registrations
	// (time that is ours, not etcd's). Default clock.Real().
	Clock clock.Clock
	// Metrics receives counts of renewals, lost leases, registrations and
	// region applies. Default nil: nothing recorded.
	Metrics *Metrics
}

// DefaultPrefix is the key prefix when ClientConfig.Prefix is empty.
const DefaultPrefix = "/shardwise/"

const defaultDialTimeout = 5 * time.Second

func (c ClientConfig) withDefaults() ClientConfig {
	if c.DialTimeout == 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Clock = clock.OrReal(c.Clock)
	return c
}

// Validate reports the first field that cannot work, after defaults.
func (c ClientConfig) Validate() error {
	c = c.withDefaults()
	if len(c.Endpoints) == 0 {
		return errcode.Config("ClientConfig.Endpoints", c.Endpoints, "at least one etcd endpoint is required (for example http://127.0.0.1:2379)")
	}
	for i, ep := range c.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			return errcode.Config(fmt.Sprintf("ClientConfig.Endpoints[%d]", i), ep, err.Error())
		}
	}
	if c.DialTimeout < 0 {
		return errcode.Config("ClientConfig.DialTimeout", c.DialTimeout, "must not be negative")
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") {
		return errcode.Config("ClientConfig.Prefix", c.Prefix, `must start and end with "/"`)
	}
	return nil
}

func checkEndpoint(ep string) error {
	if strings.TrimSpace(ep) == "" {
		return fmt.Errorf("empty endpoint")
	}
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return fmt.Errorf("not a URL: %v", err)
		}
		if u.Host == "" {
			return fmt.Errorf("URL has no host")
		}
		switch u.Scheme {
		case "http", "https", "unix", "unixs":
		default:
			return fmt.Errorf("scheme %q is not http, https, unix or unixs", u.Scheme)
		}
		return nil
	}
	// host:port without a scheme: the port must be one, or the dial
	// fails only after the whole dial timeout.
	_, port, err := net.SplitHostPort(ep)
	if err != nil {
		return fmt.Errorf("must be host:port or a URL such as http://host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a TCP port (1 to 65535)", port)
	}
	return nil
}

// Client is shardwise's handle on etcd: membership, node ids and the region
// table, all under one key prefix. Safe for concurrent use.
type Client struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger
	clock  clock.Clock
	met    *Metrics

	// ctx is cancelled by Close; every goroutine the client starts (watches)
	// derives from it and is counted in wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards closed against wg.Go racing Close's Wait
	closed bool
	regs   map[*Registration]struct{} // live registrations, closed by Close
	// leaders are the live leaderships won through this client, resigned
	// by Close.
	leaders map[*Leadership]struct{}
	// campaigns counts the goroutines running etcd's Campaign; Close waits
	// for them after closing the etcd client, which ends them.
	campaigns sync.WaitGroup

	// beforeApplyTxn, when set by a test, runs between ApplyRegions'
	// membership pre-check and its transaction.
	beforeApplyTxn func()
	// beforeWatch, when set by a test, runs each time WatchRegions or
	// WatchMembers is about to (re)start its etcd watch: tests compact
	// history there to force ErrCompacted, or return an error to stand for
	// a watch broken some other way (as if etcd lost its leader).
	beforeWatch func() error
	closeOnce   sync.Once
}

// Connect dials etcd and checks that it answers before returning.
func Connect(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Context:     context.WithoutCancel(ctx),
		Logger:      newZapLogger(cfg.Logger, zapcore.ErrorLevel),
	})
	if err != nil {
		return nil, ErrUnavailable.Wrap("connect to %v: %v", cfg.Endpoints, err)
	}
	// clientv3.New does not prove a server answers; a count-only read does.
	pingCtx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pingCtx, cfg.Prefix, clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, ErrUnavailable.Wrap("etcd at %v did not answer: %v", cfg.Endpoints, err)
	}
	c := &Client{cli: cli, prefix: cfg.Prefix, log: cfg.Logger, clock: cfg.Clock, met: cfg.Metrics, regs: make(map[*Registration]struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Prefix is the key prefix this client works under.
func (c *Client) Prefix() string { return c.prefix }

// Close closes the registrations made through this client (their nodes are
// told, and their ids are freed at once), resigns its leaderships, stops the client's watches and
// waits for them, and closes the connection. Idempotent.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		regs := slices.Collect(maps.Keys(c.regs))
		leaders := slices.Collect(maps.Keys(c.leaders))
		c.mu.Unlock()
		var wg sync.WaitGroup
		for _, r := range regs {
			wg.Go(func() { _ = r.Close() })
		}
		for _, l := range leaders {
			wg.Go(func() { _ = l.Resign() })
		}
		wg.Wait()
		c.cancel()
		c.wg.Wait()
		err = c.cli.Close()
		c.campaigns.Wait()
	})
	return err
}

// goWithClient runs f in a goroutine owned by the client: its ctx ends when
// either parent or the client is closed, and Close waits for it.
func (c *Client) goWithClient(parent context.Context, f func(ctx context.Context)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrUnavailable.Wrap("client is closed")
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(c.ctx, cancel)
	c.wg.Go(func() {
		defer cancel()
		defer stop()
		f(ctx)
	})
	return nil
}

// checkOpen fails fast once Close has begun (the etcd client would retry a
// closed connection for seconds before giving up).
func (c *Client) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrUnavailable.Wrap("client is closed")
	}
	return nil
}

// track adds a live registration; it fails once Close has begun.
func (c *Client) track(r *Registration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrUnavailable.Wrap("client is closed")
	}
	c.regs[r] = struct{}{}
	return nil
}

func (c *Client) untrack(r *Registration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.regs, r)
}

func (c *Client) memberKey(id NodeID) string {
	return fmt.Sprintf("%smembers/%03d", c.prefix, uint8(id))
}

func (c *Client) membersPrefix() string { return c.prefix + "members/" }

func (c *Client) nameKey(name string) string { return c.prefix + "names/" + name }

func (c *Client) regionsKey() string { return c.prefix + "regions/table" }

// provenanceKey holds who stored the current table and why, written in the
// same transaction as the table.
func (c *Client) provenanceKey() string { return c.prefix + "regions/provenance" }
